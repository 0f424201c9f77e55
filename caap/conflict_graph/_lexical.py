"""Word overlap of memory texts: terms and TF-IDF weights over a small pool of texts.

A second signal next to the embeddings for budgeted recall (issue 13): two turns that name the
same thing ("the chore chart", "Sam", "aftercare") share rare words even when a sentence
embedding of a short chatty turn is pulled towards its other words. Terms are lower-cased
words of three letters or more, stop words dropped, with a crude suffix strip so that "runs"
and "running" meet; weights are computed over the pool at hand (the recall candidates and the
query), so nothing is kept between calls beyond a cache of each text's terms.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

__all__ = ["STOP_WORDS", "terms", "tfidf"]

_STOP_TEXT = """
    about above after again against all also and any are aren as at be because been before
    being below between both but by can cannot could did didn does doesn doing don down during
    each few for from further had hadn has hasn have haven having he her here hers herself him
    himself his how i if in into is isn it its itself just let me more most mustn my myself no
    nor not now of off on once only or other ought our ours ourselves out over own same shan
    she should shouldn so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was wasn we were weren what when where
    which while who whom why will with won would wouldn you your yours yourself yourselves
    yes yeah okay ok thanks thank please really actually still even though much many get got
    going gonna want wanna like know think say said tell told one two well back way
"""
#: Function words and the commonest verbs and adverbs of English: they say nothing about what a
#: text is about.
STOP_WORDS = frozenset(_STOP_TEXT.split())

_WORD = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=65_536)
def terms(text: str) -> tuple[str, ...]:
    """The content terms of a text, in order (repeats kept)."""
    return tuple(
        _stem(w) for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in STOP_WORDS
    )


def tfidf(texts: Sequence[str], *, shared_only: bool = False) -> npt.NDArray[np.float32]:
    """Unit TF-IDF rows of ``texts`` over their own vocabulary (``len(texts)`` rows).

    Term frequency is sub-linear (``1 + log tf``) and inverse document frequency is smoothed
    over the pool (``log((1 + n) / (1 + df)) + 1``); a text without terms is a zero row.

    With ``shared_only``, the rows are normalised over every term but keep only the columns of
    terms found in two texts or more: the cosine of two different texts is the same, and the
    rows (and their products) are much narrower. A row's norm is then at most 1.
    """
    counts = [Counter(terms(t)) for t in texts]
    vocab: dict[str, int] = {}
    for c in counts:
        for w in c:
            vocab.setdefault(w, len(vocab))
    out = np.zeros((len(texts), max(1, len(vocab))), dtype=np.float32)
    if not vocab:
        return out
    df = np.zeros(len(vocab), dtype=np.float32)
    for i, c in enumerate(counts):
        for w, n in c.items():
            j = vocab[w]
            out[i, j] = 1.0 + math.log(n)
            df[j] += 1.0
    out *= np.log((1.0 + len(texts)) / (1.0 + df)) + 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    if shared_only:
        out = out[:, df >= 2]
    result: npt.NDArray[np.float32] = (out / norms).astype(np.float32)
    return result
