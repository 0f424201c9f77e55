"""Input checks for the public API: every bad value is rejected before any work, with an error
that names the field.

* Texts (memory text, facets, queries) must be ``str``, valid Unicode (no lone surrogates) and
  at most ``max_text_bytes`` of UTF-8 (default :data:`DEFAULT_MAX_TEXT_BYTES`, 32 KiB). A longer
  text is rejected, never truncated; :func:`split_text` splits one on request.
* ``metadata`` must be a mapping that survives a JSON round trip unchanged: string keys; values
  ``None``, ``bool``, ``int``, finite ``float``, ``str``, ``list`` or a nested mapping; at most
  :data:`MAX_JSON_DEPTH` deep and :data:`DEFAULT_MAX_METADATA_BYTES` serialised. Sets, tuples,
  bytes, NaN and infinities are rejected, not silently converted.
* ``provenance`` must be a mapping of ``str`` to ``str``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "DEFAULT_MAX_METADATA_BYTES",
    "DEFAULT_MAX_TEXT_BYTES",
    "MAX_JSON_DEPTH",
    "check_items",
    "check_json_mapping",
    "check_memory_id",
    "check_provenance",
    "check_text",
    "split_text",
]

DEFAULT_MAX_TEXT_BYTES = 32 * 1024
"""Longest memory text (and facet, and query) accepted, in UTF-8 bytes: 32 KiB."""
DEFAULT_MAX_METADATA_BYTES = 64 * 1024
"""Largest ``metadata`` accepted, as compact JSON in UTF-8 bytes: 64 KiB."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of lists and mappings accepted in ``metadata``."""


def _utf8_len(value: str, field: str) -> int:
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{field} is not valid Unicode (a lone surrogate at position {exc.start})"
        ) from None


def check_text(
    value: object,
    field: str,
    max_bytes: int = DEFAULT_MAX_TEXT_BYTES,
    *,
    blank_ok: bool = False,
) -> str:
    """Return ``value`` if it is an acceptable text, else raise naming ``field``.

    Raises:
        TypeError: Not a ``str``.
        ValueError: Blank (unless ``blank_ok``), not valid Unicode, or over ``max_bytes``.
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__}")
    if not blank_ok and not value.strip():
        raise ValueError(f"{field} must be a non-empty string")
    size = _utf8_len(value, field)
    if size > max_bytes:
        raise ValueError(
            f"{field} is {size} bytes of UTF-8, over the limit of {max_bytes}; texts are never "
            "truncated: split it (caap.split_text) or raise max_text_bytes"
        )
    return value


def _check_json_value(value: object, where: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{where} is nested more than {MAX_JSON_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}, which JSON cannot store")
        return
    if isinstance(value, str):
        _utf8_len(value, where)
        return
    if isinstance(value, list):
        for n, item in enumerate(value):
            _check_json_value(item, f"{where}[{n}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a {type(key).__name__} key {key!r}; keys must be str")
            _utf8_len(key, f"{where} key {key[:40]!r}")
            _check_json_value(item, f"{where}[{key!r}]", depth + 1)
        return
    raise TypeError(
        f"{where} is a {type(value).__name__}, which JSON cannot store unchanged "
        "(use None, bool, int, finite float, str, list or a mapping)"
    )


def check_json_mapping(
    value: object, field: str, max_bytes: int = DEFAULT_MAX_METADATA_BYTES
) -> dict[str, Any]:
    """Return ``value`` as a dict if it survives a JSON round trip unchanged (``None`` -> {})."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a mapping, got {type(value).__name__}")
    _check_json_value(value, field, 0)
    out = dict(value)
    size = len(json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > max_bytes:
        raise ValueError(f"{field} is {size} bytes as JSON, over the limit of {max_bytes}")
    return out


def check_provenance(value: object, max_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> dict[str, str]:
    """Return ``value`` as ``dict[str, str]`` (``None`` -> {}), else raise naming the entry."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"provenance must be a mapping of str to str, got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"provenance keys must be str, got {type(key).__name__} {key!r}")
        check_text(key, "provenance key", max_bytes)
        out[key] = check_text(item, f"provenance[{key!r}]", max_bytes, blank_ok=True)
    return out


def check_items(items: object) -> list[Any]:
    """The items of ``remember_many`` as a list; a lone str, bytes or mapping is rejected."""
    if isinstance(items, (str, bytes, bytearray)):
        raise TypeError(
            "items must be an iterable of texts or mappings, got a single "
            f"{type(items).__name__}; wrap it in a list: [text]"
        )
    if isinstance(items, Mapping):
        raise TypeError("items must be an iterable of mappings, got a single mapping; use [item]")
    if not isinstance(items, Iterable):
        raise TypeError(
            f"items must be an iterable of texts or mappings, got {type(items).__name__}"
        )
    try:
        return list(items)
    except TypeError:
        raise TypeError(
            f"items must be an iterable of texts or mappings, got {type(items).__name__}"
        ) from None


def check_memory_id(value: object) -> str:
    """A memory id must be a non-empty ``str``."""
    if not isinstance(value, str):
        raise TypeError(f"memory_id must be a str, got {type(value).__name__}")
    if not value.strip():
        raise ValueError("memory_id must be a non-empty string")
    return value


_BREAK = re.compile(r"(?<=[.!?。！？])\s+|\n\s*\n")


def split_text(text: str, max_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> list[str]:
    """Split ``text`` into pieces of at most ``max_bytes`` UTF-8 bytes each, on request.

    Pieces break at paragraph and sentence ends where possible, else at spaces, else inside a
    word; nothing is dropped except the whitespace at the breaks.

    Example:
        >>> split_text("One. Two. Three.", max_bytes=9)
        ['One. Two.', 'Three.']
    """
    check_text(text, "text", max_bytes=len(text.encode("utf-8", "surrogatepass")) + 1)
    if max_bytes < 4:
        raise ValueError(f"max_bytes must be >= 4, got {max_bytes!r}")
    pieces: list[str] = []
    current = ""
    for unit in (u for u in _BREAK.split(text) if u.strip()):
        candidate = f"{current} {unit}" if current else unit
        if len(candidate.encode("utf-8")) <= max_bytes:
            current = candidate
            continue
        if current:
            pieces.append(current)
        current = ""
        for word in unit.split(" "):
            candidate = f"{current} {word}" if current else word
            if len(candidate.encode("utf-8")) <= max_bytes:
                current = candidate
                continue
            if current:
                pieces.append(current)
            current = ""
            while len(word.encode("utf-8")) > max_bytes:
                cut = max_bytes
                while len(word[:cut].encode("utf-8")) > max_bytes:
                    cut -= 1
                pieces.append(word[:cut])
                word = word[cut:]
            current = word
    if current.strip():
        pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]
