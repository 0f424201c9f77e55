"""Who a memory's claim comes from: the user, another person, a record, or hearsay.

The guard (:mod:`caap.policy._guard`) lets a high-stakes commit rest only on first-hand claims:
the user's own account or a record. The ``learned`` layer's facet model cannot say that (its
"attributed" label is learned from conflict types, not from who speaks), so the cues' "don't
know" held nearly every memory without a first-person cue as not first-hand. This head is a
logistic model over the packaged embedding, fitted on memories labelled by who the claim comes
from (``caap/benchmark/data/blind/speakers``, written blind), with the share of
:data:`FIRST_HAND` needed to clear a memory chosen on dev so that it clears no more other
people's accounts than the earlier reading did.

Weights ship as ``caap/data/speaker_head.npz`` with a JSON card (fitted on ``train.jsonl``,
chosen on ``dev.jsonl``); retrain with ``caap relations train-speaker --data TRAIN.jsonl --dev
DEV.jsonl --out FILE`` (``--data`` and ``--dev`` repeat).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from caap._small_heads import head_arrays, labelled_rows

__all__ = [
    "FIRST_HAND",
    "SPEAKERS",
    "SpeakerHead",
    "default_speaker_path",
    "load_speaker_rows",
    "train_speaker_head",
]

Array = npt.NDArray[np.float32]

#: Who a claim comes from (the labels of the speaker corpus).
SPEAKERS = ("user", "person", "record", "hearsay")
#: The speakers whose claims the guard treats as first-hand.
FIRST_HAND = ("user", "record")


def default_speaker_path() -> Path:
    """The speaker head shipped with caap."""
    return Path(str(resources.files("caap") / "data" / "speaker_head.npz"))


class SpeakerHead:
    """The fitted head: probabilities over :data:`SPEAKERS` from unit embeddings.

    Raises:
        ValueError: the weights lack an array or do not fit ``dimension``.
    """

    def __init__(self, path: str | Path | None = None, *, dimension: int | None = None) -> None:
        self.path = Path(path) if path is not None else default_speaker_path()
        z = head_arrays(self.path, "speaker")
        self.w = np.asarray(z["w"], dtype=np.float32)
        self.b = np.asarray(z["b"], dtype=np.float32)
        self.threshold = float(z["threshold"])
        if self.w.shape[1] != len(SPEAKERS) or (
            dimension is not None and self.w.shape[0] != dimension
        ):
            raise ValueError(
                f"speaker weights {self.path} have shape {self.w.shape}, expected "
                f"({dimension or 'dim'}, {len(SPEAKERS)})"
            )

    def probabilities(self, vectors: Array) -> Array:
        """Rows over :data:`SPEAKERS` for rows of embeddings."""
        if len(vectors) == 0:
            return np.zeros((0, len(SPEAKERS)), dtype=np.float32)
        z = np.asarray(vectors, dtype=np.float32) @ self.w + self.b
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        out: Array = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        return out

    def first_hand(self, vectors: Array) -> Array:
        """Per row, the probability that the claim is the user's own or a record's."""
        p = self.probabilities(vectors)
        out: Array = p[:, [SPEAKERS.index(s) for s in FIRST_HAND]].sum(axis=1)
        return out


def load_speaker_rows(path: str | Path) -> list[dict[str, Any]]:
    """Labelled memories (JSONL lines with ``text`` and ``speaker``) from a file.

    Raises:
        ValueError: a line without text or with an unknown speaker.
    """
    return labelled_rows(path, "speaker", SPEAKERS)


def train_speaker_head(
    train: Sequence[dict[str, Any]],
    dev: Sequence[dict[str, Any]],
    embed: Any,
    out: str | Path,
    *,
    baseline_dev: Sequence[bool] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit the head on ``train``; choose the regularisation and the clearing threshold on
    ``dev``: no more wrongly cleared non-first-hand memories than ``baseline_dev`` (a reading
    to do no worse than; none when absent), then the most first-hand memories cleared. Writes
    ``out`` and its card; returns the card. ``embed`` maps texts to unit embeddings."""
    from sklearn.linear_model import LogisticRegression

    from caap.conflict_graph._relations_train import _dense_weights

    x_train = np.asarray(embed([r["text"] for r in train]), dtype=np.float32)
    x_dev = np.asarray(embed([r["text"] for r in dev]), dtype=np.float32)
    y_train = np.array([SPEAKERS.index(r["speaker"]) for r in train])
    first = np.array([r["speaker"] in FIRST_HAND for r in dev])
    allowed = int((np.asarray(baseline_dev, dtype=bool) & ~first).sum()) if baseline_dev else 0
    best: tuple[int, float, float, Any] | None = None
    for c in (0.3, 1.0, 3.0, 10.0):
        model = LogisticRegression(C=c, max_iter=3000, random_state=seed).fit(x_train, y_train)
        p = model.predict_proba(x_dev)
        share = p[:, [SPEAKERS.index(s) for s in FIRST_HAND]].sum(axis=1)
        for t in (0.6, 0.7, 0.8, 0.9, 0.95):
            cleared = share >= t
            if int((cleared & ~first).sum()) > allowed:
                continue
            recall = int((cleared & first).sum())
            if best is None or recall > best[0]:
                best = (recall, c, t, model)
    if best is None:
        raise ValueError("no setting clears first-hand memories without wrongly clearing others")
    recall, c, t, model = best
    w, b = _dense_weights(model, x_train.shape[1], len(SPEAKERS))
    out = Path(out)
    np.savez(out, w=w, b=b, threshold=np.float32(t))
    card = {
        "speakers": list(SPEAKERS),
        "first_hand": list(FIRST_HAND),
        "train_memories": len(train),
        "dev_memories": len(dev),
        "C": c,
        "threshold": t,
        "dev_first_hand_cleared": recall,
        "dev_first_hand": int(first.sum()),
        "dev_others_wrongly_cleared_allowed": allowed,
        "seed": seed,
    }
    out.with_suffix(".json").write_text(json.dumps(card, indent=2) + "\n")
    return card
