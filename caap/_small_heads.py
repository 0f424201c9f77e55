"""What the small heads over the packaged embedding share (the speaker head, the request head):
reading their labelled texts and their weights files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["head_arrays", "labelled_rows"]


def labelled_rows(path: str | Path, field: str, labels: Sequence[str]) -> list[dict[str, Any]]:
    """The JSONL lines of ``path`` (blank lines skipped), each with a non-empty ``text`` and
    ``field`` among ``labels``.

    Raises:
        ValueError: a line without text or with another ``field`` (the message names the file
            and the line).
    """
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not str(row.get("text", "")).strip() or row.get(field) not in labels:
            raise ValueError(f"{path}:{n}: needs a text and a {field} among {tuple(labels)}")
        rows.append(row)
    return rows


def head_arrays(path: Path, what: str) -> dict[str, np.ndarray]:
    """A head's weights file: its arrays ``w``, ``b`` and ``threshold``.

    Raises:
        ValueError: one is missing (the message names ``what`` and the file).
    """
    with np.load(path) as z:
        missing = [k for k in ("w", "b", "threshold") if k not in z.files]
        if missing:
            raise ValueError(f"{what} weights {path} lack arrays {missing}")
        return {k: np.asarray(z[k]) for k in ("w", "b", "threshold")}
