"""Refuse to run next to the unrelated ``caap`` distribution on PyPI.

This project is distributed as ``caap-memory`` and imported as ``caap``. The PyPI name ``caap``
belongs to another project ("CPU AS A PROGRAM") that also installs a top-level ``caap``
package: the two overwrite each other's files, so they cannot share an environment.
"""

from __future__ import annotations

from importlib import metadata

#: This project's distribution name on PyPI.
DISTRIBUTION = "caap-memory"
#: The start of this project's summary (``pyproject.toml``'s ``description``); an install of
#: this project under its old name ``caap`` carries it too.
OWN_SUMMARY = "Conflict-aware memory"


def foreign_caap() -> str | None:
    """A description of the unrelated ``caap`` distribution when it is installed, else ``None``."""
    try:
        dist = metadata.distribution("caap")
    except metadata.PackageNotFoundError:
        return None
    summary = str(dist.metadata.get("Summary") or "")
    if summary.startswith(OWN_SUMMARY):
        return None  # this project, installed under its old name
    return f"caap {dist.version} ({summary or 'no summary'})"


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
