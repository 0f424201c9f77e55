"""Whether a stored turn only asks: a learned reading beside the sentence-form rules.

A chat turn stored as a memory may only ask the assistant something ("best app to split bills
w roommates?") and tell nothing about the user. The sentence-form rules
(:mod:`caap.policy._speech`) catch a question by its mark or its word order; in chat they miss
one written without either ("meanwhile best way to store parmigiano so it doesn't dry out") and
drop a statement whose turn ends in a question. This head is a logistic model over the packaged
embedding of the whole turn and the rules' own verdict (whether they find nothing stated),
fitted on chat turns labelled ``states`` or ``asks`` by writers who never read the rules
(``caap/benchmark/data/blind/speech``) and on the notes of blind train's TANGLE instances as
``states`` (a note written in the third person states something, and chat turns alone did not
teach that), with its threshold chosen on dev so that it reads no more stating turns as stating
nothing than the rules do there.

:func:`stated_text` combines the two: nothing when the head reads the turn as only asking; the
whole turn when the rules find nothing stated but the head reads it as stating; otherwise the
rules' stated part. Weights ship as ``caap/data/request_head.npz`` with a JSON card; retrain
with ``caap relations train-request --data TRAIN.jsonl --dev DEV.jsonl --out FILE`` and point
:data:`HEAD_ENV` (``CAAP_REQUEST_HEAD``) at the file to use it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from caap._small_heads import head_arrays, labelled_rows
from caap.policy._speech import stated_part

__all__ = [
    "HEAD_ENV",
    "LABELS",
    "RequestHead",
    "default_request_path",
    "load_request_rows",
    "read_stated",
    "request_features",
    "shared_request_head",
    "stated_text",
    "train_request_head",
]

Array = npt.NDArray[np.float32]

#: Environment variable naming other request head weights than the shipped ones (an ``.npz``
#: written by ``caap relations train-request``).
HEAD_ENV = "CAAP_REQUEST_HEAD"
#: The labels of the speech corpus: the turn tells something about the user, or only asks.
LABELS = ("states", "asks")


def default_request_path() -> Path:
    """The request head shipped with caap."""
    return Path(str(resources.files("caap") / "data" / "request_head.npz"))


def request_features(vectors: Array, texts: Sequence[str]) -> Array:
    """The head's input: each turn's unit embedding and whether the rules find nothing
    stated in it."""
    rules_empty = np.array([[0.0 if stated_part(t) else 1.0] for t in texts], dtype=np.float32)
    return np.hstack([np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1), rules_empty])


class RequestHead:
    """The fitted head: the probability that a turn only asks.

    Raises:
        ValueError: the weights lack an array or do not fit ``dimension``.
    """

    def __init__(self, path: str | Path | None = None, *, dimension: int | None = None) -> None:
        self.path = Path(path) if path is not None else default_request_path()
        z = head_arrays(self.path, "request head")
        self.w = np.asarray(z["w"], dtype=np.float32).reshape(-1)
        self.b = float(z["b"])
        self.threshold = float(z["threshold"])
        if dimension is not None and self.w.shape[0] != dimension + 1:
            raise ValueError(
                f"request head weights {self.path} read {self.w.shape[0] - 1}-dimensional "
                f"embeddings, the embedder gives {dimension}"
            )

    def asks(self, vectors: Array, texts: Sequence[str]) -> Array:
        """Per turn, the probability that it only asks (``vectors``: the turns' unit
        embeddings, row for row)."""
        if not len(texts):
            return np.zeros(0, dtype=np.float32)
        z = request_features(vectors, texts) @ self.w + self.b
        out: Array = (1.0 / (1.0 + np.exp(-z))).astype(np.float32)
        return out


def stated_text(text: str, asks: float | None, threshold: float) -> str:
    """What a stored turn states: nothing when the head's ``asks`` reading is at least
    ``threshold``; the whole turn when the rules find nothing stated but the head reads it as
    stating; otherwise the rules' stated part (also without a reading, ``asks`` ``None``)."""
    rules = stated_part(text)
    if asks is None:
        return rules
    if asks >= threshold:
        return ""
    return rules or text.strip()


_shared: dict[Path, RequestHead | None] = {}
_shared_lock = threading.Lock()


def shared_request_head(path: str | Path | None = None) -> RequestHead | None:
    """One head per weights file in the process; ``None`` when the file is absent or cannot
    be read (the rules alone then say what a turn states)."""
    p = Path(path) if path is not None else default_request_path()
    with _shared_lock:
        if p not in _shared:
            try:
                _shared[p] = RequestHead(p)
            except (OSError, ValueError):
                _shared[p] = None
        return _shared[p]


_said_cache: dict[tuple[Path, str], str] = {}
_CACHE_MAX = 50_000


def read_stated(embedder: Any, texts: Sequence[str]) -> list[str] | None:
    """What each of ``texts`` states (:func:`stated_text`) under the shipped head, reading each
    distinct text once per process (what it states is kept, so the rules are not read again);
    ``None`` when there is no head or it does not fit the embedder (the rules alone then say
    what a turn states). The head is the shipped one, or the one :data:`HEAD_ENV` names."""
    head = shared_request_head(os.environ.get(HEAD_ENV) or None)
    if head is None or head.w.shape[0] != int(getattr(embedder, "dimension", -1)) + 1:
        return None
    with _shared_lock:
        known = {t: _said_cache[(head.path, t)] for t in texts if (head.path, t) in _said_cache}
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
        p = head.asks(embedder.encode(missing), missing)
        fresh = {
            t: stated_text(t, float(v), head.threshold) for t, v in zip(missing, p, strict=True)
        }
        known.update(fresh)
        with _shared_lock:
            if len(_said_cache) > _CACHE_MAX:
                _said_cache.clear()
            _said_cache.update({(head.path, t): said for t, said in fresh.items()})
    return [known[t] for t in texts]


def load_request_rows(path: str | Path) -> list[dict[str, Any]]:
    """Labelled turns (JSONL lines with ``text`` and ``label`` in :data:`LABELS`) from a file;
    from a folder of TANGLE instances, every memory text once, as ``states`` (a stored note
    states something).

    Raises:
        ValueError: a line without text or with an unknown label (the message names it).
    """
    if Path(path).is_dir():
        from caap.benchmark.dataset import iter_dataset

        texts = dict.fromkeys(m.text for inst in iter_dataset(path) for m in inst.memories)
        return [{"text": t, "label": "states"} for t in texts]
    return labelled_rows(path, "label", LABELS)


def train_request_head(
    train: Sequence[dict[str, Any]],
    dev: Sequence[dict[str, Any]],
    embed: Callable[[list[str]], Any],
    out: str | Path,
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit the head on ``train``; choose C and the threshold on ``dev``: no more ``states``
    turns read as stating nothing than the rules alone, then the most ``asks`` turns caught.
    Writes ``out`` and its card; returns the card. ``embed`` maps texts to unit embeddings.

    Raises:
        ValueError: ``train`` lacks one of the labels, or no setting meets the dev bound.
    """
    from sklearn.linear_model import LogisticRegression

    texts = [r["text"] for r in train]
    y = np.array([r["label"] == "asks" for r in train], dtype=np.int64)
    if len(set(y.tolist())) < 2:
        raise ValueError("training turns need both labels, states and asks")
    x = request_features(np.asarray(embed(texts)), texts)
    dev_texts = [r["text"] for r in dev]
    xd = request_features(np.asarray(embed(dev_texts)), dev_texts)
    asks_dev = np.array([r["label"] == "asks" for r in dev])
    pairs = zip(dev_texts, asks_dev, strict=True)
    rules_lost = int(sum(not stated_part(t) for t, a in pairs if not a))
    best: tuple[int, float, float, Any] | None = None
    for c in (0.1, 0.3, 1.0, 3.0, 10.0):
        model = LogisticRegression(C=c, max_iter=3000, random_state=seed).fit(x, y)
        p = model.predict_proba(xd)[:, 1]
        for t in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
            said = [stated_text(s, float(v), t) for s, v in zip(dev_texts, p, strict=True)]
            lost = sum(not s for s, a in zip(said, asks_dev, strict=True) if not a)
            caught = sum(not s for s, a in zip(said, asks_dev, strict=True) if a)
            if lost > rules_lost:
                continue
            if best is None or caught > best[0]:
                best = (caught, c, t, model)
    if best is None:
        raise ValueError("no setting reads fewer stating turns as stating nothing than the rules")
    caught, c, t, model = best
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        out,
        w=model.coef_[0].astype(np.float32),
        b=np.float32(model.intercept_[0]),
        threshold=np.float32(t),
    )
    card = {
        "labels": list(LABELS),
        "kind": "logistic regression over the turn's unit embedding and the rules' verdict",
        "train_turns": len(train),
        "dev_turns": len(dev),
        "C": c,
        "threshold": t,
        "dev_asks_caught": caught,
        "dev_asks": int(asks_dev.sum()),
        "dev_states_lost_allowed": rules_lost,
        "seed": seed,
    }
    out.with_suffix(".json").write_text(json.dumps(card, indent=2) + "\n")
    return card
