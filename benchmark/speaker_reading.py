"""Who is speaking: the guard's first-hand reading against a head fitted on blind labels.

The guard lets a high-stakes commit rest only on first-hand claims (the user's own account or a
record). This measures, on the blind speaker corpus (``caap/benchmark/data/blind/speakers``:
memories labelled ``user`` / ``person`` / ``record`` / ``hearsay`` by writers who read no code),
how many first-hand memories the shipped ``learned`` layer clears (attribution below one half)
and how many other people's accounts it wrongly clears, next to a logistic head on the packaged
embeddings fitted on ``train.jsonl``, its ``C`` and clearing threshold chosen on ``dev.jsonl``
(no more wrong clears than the shipped reading there, then the most first-hand recall), and
reported once on the frozen ``test.jsonl``.

    PYTHONPATH=$PWD python benchmark/speaker_reading.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from caap.conflict_graph._relations_learned import LearnedRelations

DATA = Path("caap/benchmark/data/blind/speakers")
LABELS = ("user", "person", "record", "hearsay")
FIRST_HAND = ("user", "record")


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def _row(name: str, cleared: np.ndarray, rows: list[dict[str, Any]]) -> str:
    first = np.array([r["speaker"] in FIRST_HAND for r in rows])
    return (
        f"{name}: first-hand cleared {int((cleared & first).sum())}/{int(first.sum())}, "
        f"others' accounts wrongly cleared {int((cleared & ~first).sum())}/{int((~first).sum())}"
    )


def main() -> None:
    train, dev, test = _load("train.jsonl"), _load("dev.jsonl"), _load("test.jsonl")
    layer = LearnedRelations()

    def shipped(rows: list[dict[str, Any]]) -> np.ndarray:
        facets = layer.facets([r["text"] for r in rows])
        return np.array([f.source_confidence < 0.5 for f in facets])

    def embed(rows: list[dict[str, Any]]) -> np.ndarray:
        return np.asarray(layer.embedder.encode([r["text"] for r in rows]))

    def labels(rows: list[dict[str, Any]]) -> np.ndarray:
        return np.array([LABELS.index(r["speaker"]) for r in rows])

    x_train, x_dev, x_test = embed(train), embed(dev), embed(test)
    first_dev = np.array([r["speaker"] in FIRST_HAND for r in dev])
    allowed = int((shipped(dev) & ~first_dev).sum())
    best: tuple[int, float, float, LogisticRegression] | None = None
    for c in (0.3, 1.0, 3.0, 10.0):
        model = LogisticRegression(C=c, max_iter=3000).fit(x_train, labels(train))
        p = model.predict_proba(x_dev)
        for t in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
            cleared = p[:, 0] + p[:, 2] >= t
            if int((cleared & ~first_dev).sum()) > allowed:
                continue
            recall = int((cleared & first_dev).sum())
            if best is None or recall > best[0]:
                best = (recall, c, t, model)
    assert best is not None
    _, c, t, model = best
    p = model.predict_proba(x_test)
    acc = float((p.argmax(axis=1) == labels(test)).mean())
    print(f"{len(train)} train / {len(dev)} dev / {len(test)} test memories")
    print(_row("shipped learned layer, test", shipped(test), test))
    print(_row(f"fitted head (C={c}, clear at {t}), test", p[:, 0] + p[:, 2] >= t, test))
    print(f"fitted head four-way accuracy on test: {acc:.2f}")


if __name__ == "__main__":
    main()
