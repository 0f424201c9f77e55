"""Refuse to run next to the unrelated ``caap`` distribution on PyPI.

This project is distributed as ``caap-memory`` and imported as ``caap``. The PyPI name ``caap``
belongs to another project ("CPU AS A PROGRAM") that also installs a top-level ``caap``
package: the two overwrite each other's files, so they cannot share an environment.
"""

from __future__ import annotations

import os
import sys

#: This project's distribution name on PyPI.
DISTRIBUTION = "caap-memory"
#: The start of this project's summary (``pyproject.toml``'s ``description``); an install of
#: this project under its old name ``caap`` carries it too.
OWN_SUMMARY = "Conflict-aware memory"


def _headers(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the headers end at the first blank line
                key, sep, value = line.partition(":")
                if sep and not key.startswith((" ", "\t")):
                    out.setdefault(key.strip().lower(), value.strip())
    except OSError:
        pass
    return out


def foreign_caap() -> str | None:
    """A description of the unrelated ``caap`` distribution when it is installed, else ``None``.

    Reads the ``caap-*.dist-info`` / ``.egg-info`` metadata on ``sys.path`` directly (not
    ``importlib.metadata``, whose import alone costs more than the command line's start).
    """
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if not low.startswith(("caap-", "caap.")) or not low.endswith(
                (".dist-info", ".egg-info")
            ):
                continue
            meta = os.path.join(entry or ".", name, "METADATA")
            if not os.path.exists(meta):
                meta = os.path.join(entry or ".", name, "PKG-INFO")
            head = _headers(meta)
            if head.get("name", "").lower().replace("_", "-") != "caap":
                continue
            summary = head.get("summary", "")
            if summary.startswith(OWN_SUMMARY):
                continue  # this project, installed under its old name
            return f"caap {head.get('version', '?')} ({summary or 'no summary'})"
    return None


def conflict_message(found: str) -> str:
    """The error text for an environment that holds the unrelated ``caap`` distribution."""
    return (
        f"another project's distribution is installed here: {found}. It is not this project "
        f"({DISTRIBUTION}) but installs a top-level 'caap' package too, so the two cannot share "
        "an environment (their files overwrite each other). Fix: pip uninstall -y caap "
        f"{DISTRIBUTION} && pip install {DISTRIBUTION}, or use a separate virtual environment."
    )


def check_distribution() -> None:
    """Raise ``ImportError`` when the unrelated ``caap`` distribution is installed."""
    found = foreign_caap()
    if found is not None:
        raise ImportError(conflict_message(found))
