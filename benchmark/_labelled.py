"""What the scripts that read labelled JSONL sets share: the lines, and the area under the curve."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["auc", "jsonl_rows"]


def auc(score: np.ndarray, positive: np.ndarray) -> float:
    """The probability that a positive scores above a negative (ties count half)."""
    pos, neg = score[positive], score[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    return float(np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :]))


def jsonl_rows(paths: Sequence[str], what: str) -> list[dict[str, Any]]:
    """Every line of the ``.jsonl`` files under ``paths`` (files or folders), in file order;
    exits naming ``what`` was looked for when there is none."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        p = Path(path)
        for f in sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]:
            rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"no {what} under {', '.join(paths)}")
    return rows
