"""Features of the ``learned`` relation layer, shared by training and inference (numpy only).

A memory is its sentence embedding (unit vector of the whole text) and a few cheap surface
signals; a pair is the elementwise product and absolute difference of the two embeddings, their
mean, their cosine, and how the surface signals compare. No cue list decides anything here: the
signals are inputs to a fitted model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from caap.conflict_graph import _text
from caap.conflict_graph._values import values
from caap.conflict_graph.relations import RELATIONS, SITUATIONS

__all__ = [
    "FACET_CLASSES",
    "NESTED_VALUES_CONTRADICTION",
    "N_PAIR_SURFACE",
    "N_PAIR_TAIL",
    "N_READER",
    "N_SCALARS",
    "SITUATIONS",
    "SITUATION_K",
    "nearest",
    "nested_values_read",
    "pair_features",
    "pair_surface",
    "risk_features",
    "scale_odds",
    "situation_features",
    "text_features",
    "text_scalars",
]

Array = npt.NDArray[np.float32]

_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_MONTH = re.compile(r"\b(?:" + "|".join(sorted(_text.MONTHS)) + r")\b", re.I)
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|nobody|without)\b|n't\b", re.I)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|my|me|mine)\b", re.I)
_QUOTE = re.compile(r"[\"“”]")

#: Surface signals per text (see :func:`text_scalars`).
N_SCALARS = 9


def _numbers(text: str) -> frozenset[str]:
    return frozenset(_NUMBER.findall(text))


_WORD = re.compile(r"[^\W_]+", re.U)


def _words(text: str) -> frozenset[str]:
    """Lower-cased word tokens of three or more characters, and every number token."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) >= 3 or w.isdigit())


#: Surface comparisons per pair (see :func:`pair_surface`).
N_PAIR_SURFACE = 7
#: The pair reader's columns per pair (its probability of each relation; see
#: :mod:`caap.conflict_graph._pair_reader`).
N_READER = 7
#: The last columns of a pair model input: the pair reader's probabilities, then the surface
#: comparisons. They compare the two texts directly (the rest describes each text), so the
#: situation model aggregates them and training may weight them up.
N_PAIR_TAIL = N_READER + N_PAIR_SURFACE


def pair_surface(va: Array, vb: Array, ta: Sequence[str], tb: Sequence[str]) -> Array:
    """How alike two memories are on the surface, per pair: the cosine of their embeddings
    and its excess over 0.6 (near-duplicates), the share of words they have in common (of
    the union and of the shorter), and of the values they state
    (:func:`caap.conflict_graph._values.values`, one canonical form for "£475.00" and "four
    seventy-five"): whether both state values and share one, whether the values of one are
    among the other's, and whether both state values and share none. These are the signals
    that two differently worded memories state one value (agreement) or different ones."""
    cos = np.sum(va * vb, axis=1)
    out = np.zeros((len(ta), N_PAIR_SURFACE), dtype=np.float32)
    for i, (x, y) in enumerate(zip(ta, tb, strict=True)):
        wx, wy = _words(x), _words(y)
        common = len(wx & wy)
        nx, ny = values(x), values(y)
        both = bool(nx) and bool(ny)
        out[i] = (
            cos[i],
            max(float(cos[i]) - 0.6, 0.0),
            common / max(len(wx | wy), 1),
            common / max(min(len(wx), len(wy)), 1),
            float(both and bool(nx & ny)),
            float(both and (nx <= ny or ny <= nx)),
            float(both and not (nx & ny)),
        )
    return out


#: Odds factor on a source contradiction between two memories whose stated values nest (each
#: states values, and every value of one is among the other's: "£475" and "four seventy-five,
#: so 475 a month"), measured on the labelled pairs the pair reader never trained on
#: (``blind/pairs_values``): of the pairs the pair model read as a source contradiction with
#: nested values, 10 were one and 52 agreed. The pair model sees the value comparison among
#: a thousand embedding columns and under-weights it; the edge and situation readings should not
#: (training applies it the same way to the situation model's inputs).
NESTED_VALUES_CONTRADICTION = 0.15


def _nested(a: str, b: str) -> bool:
    """Both state values and every value of one is among the other's."""
    va, vb = values(a), values(b)
    return bool(va) and bool(vb) and (va <= vb or vb <= va)


def scale_odds(
    probs: Array, relation: str, factor: float, rows: Sequence[bool] | None = None
) -> Array:
    """A copy of ``probs`` (rows over :data:`RELATIONS`) with ``relation``'s odds multiplied
    by ``factor`` in the selected ``rows`` (all by default), those rows renormalised."""
    out = probs.copy()
    sel = np.ones(len(out), dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
    out[sel, RELATIONS.index(relation)] *= factor
    out[sel] /= out[sel].sum(axis=1, keepdims=True)
    return out


def nested_values_read(probs: Array, texts: Sequence[tuple[str, str]]) -> Array:
    """``probs`` with the source-contradiction odds of pairs whose values nest multiplied by
    :data:`NESTED_VALUES_CONTRADICTION` (rows renormalised)."""
    nested = [_nested(a, b) for a, b in texts]
    return scale_odds(probs, "source_contradiction", NESTED_VALUES_CONTRADICTION, nested)


def text_scalars(texts: Sequence[str]) -> Array:
    """Per text: has a year, a month name, any number; a negation; first person; a quote;
    a question mark; capitalised words past the first (names); length in words / 30."""
    out = np.zeros((len(texts), N_SCALARS), dtype=np.float32)
    for i, t in enumerate(texts):
        words = t.split()
        caps = sum(1 for w in words[1:] if w[:1].isupper())
        out[i] = (
            bool(_YEAR.search(t)),
            bool(_MONTH.search(t)),
            bool(_NUMBER.search(t)),
            bool(_NEGATION.search(t)),
            bool(_FIRST_PERSON.search(t)),
            bool(_QUOTE.search(t)),
            "?" in t,
            min(caps, 6) / 6,
            min(len(words), 60) / 30,
        )
    return out


def text_features(vectors: Array, texts: Sequence[str]) -> Array:
    """Per-memory model input: the embedding and the surface signals."""
    return np.hstack([vectors, text_scalars(texts)]).astype(np.float32)


#: What the per-memory facet model reads a memory as: a claim that holds under a condition,
#: one that places itself in a time order (a phase, a change), one attributed to a source
#: other than the user, a plain claim, or something off the topic of its neighbours.
FACET_CLASSES = ("conditional", "time_ordered", "attributed", "plain", "off_topic")


def pair_features(
    va: Array,
    vb: Array,
    ta: Sequence[str],
    tb: Sequence[str],
    fa: Array | None = None,
    fb: Array | None = None,
    reader: Array | None = None,
) -> Array:
    """Pair model input for rows of pairs: ``va[i]``/``vb[i]`` the unit embeddings of
    ``ta[i]``/``tb[i]``; ``fa``/``fb`` their facet-model probabilities (rows over
    :data:`FACET_CLASSES`; zeros when absent); ``reader`` the pair reader's probabilities
    (rows of :data:`N_READER`; zeros when absent).

    Symmetric in the two sides (a relation label is): product, absolute difference, mean,
    then the pair reader's probabilities and the surface comparisons of :func:`pair_surface`
    (together the last :data:`N_PAIR_TAIL` columns).
    """
    if fa is None or fb is None:
        fa = fb = np.zeros((len(ta), len(FACET_CLASSES)), dtype=np.float32)
    if reader is None:
        reader = np.zeros((len(ta), N_READER), dtype=np.float32)
    sa, sb = text_scalars(ta), text_scalars(tb)
    cos = np.sum(va * vb, axis=1, keepdims=True)
    numbers_differ = np.array(
        [
            [float(bool(_numbers(x)) and bool(_numbers(y)) and _numbers(x) != _numbers(y))]
            for x, y in zip(ta, tb, strict=True)
        ],
        dtype=np.float32,
    ).reshape(len(ta), 1)
    return np.hstack(
        [
            va * vb,
            np.abs(va - vb),
            (va + vb) / 2,
            cos,
            sa + sb,
            np.abs(sa - sb),
            numbers_differ,
            fa * fb,
            fa + fb,
            reader,
            pair_surface(va, vb, ta, tb),
        ]
    ).astype(np.float32)


def nearest(query_vector: Array, memory_vectors: Array, k: int) -> Array:
    """The ``k`` rows of ``memory_vectors`` most similar to ``query_vector`` (all when fewer),
    most similar first; ties keep their order."""
    if len(memory_vectors) <= k:
        return memory_vectors
    order = np.argsort(-(memory_vectors @ query_vector), kind="stable")[:k]
    out: Array = memory_vectors[order]
    return out


def risk_features(query_vector: Array, memory_vectors: Array) -> Array:
    """Risk model input for one query: its embedding and the embedding of the memory nearest
    it (zeros without memories).

    Without a query (zeros: the risk of a cluster of memories alone) the memories' mean,
    normalised, stands in for the query. Only the single nearest memory is read, not an
    average of many: what is at stake is the query's, and a sensitive memory that happens to
    be recalled nearby should not make an everyday question high-stakes.
    """
    dim = query_vector.shape[-1]
    q = query_vector
    if not np.any(q) and len(memory_vectors):
        mean = memory_vectors.mean(axis=0)
        q = mean / max(float(np.linalg.norm(mean)), 1e-9)
    if len(memory_vectors):
        near = memory_vectors[int(np.argmax(memory_vectors @ q))]
    else:
        near = np.zeros(dim, dtype=np.float32)
    return np.concatenate([q, near]).astype(np.float32)


#: How many memories nearest the query the situation model reads.
SITUATION_K = 5


def situation_features(
    sims: Array,
    pair_probs: Array,
    facet_probs: Array,
    relations: Sequence[str],
    surface: Array | None = None,
) -> Array:
    """Situation model input for one query over its ``k`` nearest memories.

    ``sims``: their query similarities, highest first (``k`` values); ``pair_probs``: the pair
    model's probabilities (rows over ``relations``) for every pair ``i < j`` of them in that
    order; ``facet_probs``: the facet model's probabilities (rows over :data:`FACET_CLASSES`);
    ``surface``: the last :data:`N_PAIR_TAIL` columns of those pairs' pair model input (the
    pair reader's probabilities and the surface comparisons; zeros when absent).
    Out: per relation the max over pairs and the mean weighted by the pair's relevance; per
    facet class the max and the mean; the top three similarities and the mean; the three
    strongest "related somehow" pair readings; the max and weighted mean of every ``surface``
    column. Nothing here depends on a wording.
    """
    k = len(sims)
    n_rel = len(relations)
    if k < 2 or len(pair_probs) == 0:
        pair_probs = np.zeros((1, n_rel), dtype=np.float32)
        weights = np.ones(1, dtype=np.float32)
    else:
        weights = np.array(
            [max(min(sims[a], sims[b]), 1e-3) for a in range(k) for b in range(a + 1, k)],
            dtype=np.float32,
        )
    if len(facet_probs) == 0:
        facet_probs = np.zeros((1, len(FACET_CLASSES)), dtype=np.float32)
    if surface is None or len(surface) != len(pair_probs):
        surface = np.zeros((len(pair_probs), N_PAIR_TAIL), dtype=np.float32)
    related = [j for j, r in enumerate(relations) if r != "unrelated"]
    strongest = np.sort(pair_probs[:, related].max(axis=1))[::-1]
    top_sims = np.zeros(3, dtype=np.float32)
    top_sims[: min(3, k)] = np.asarray(sims, dtype=np.float32)[:3]
    return np.concatenate(
        [
            pair_probs.max(axis=0),
            (pair_probs * weights[:, None]).sum(axis=0) / weights.sum(),
            facet_probs.max(axis=0),
            facet_probs.mean(axis=0),
            top_sims,
            [float(np.mean(sims)) if k else 0.0],
            np.pad(strongest[:3], (0, max(0, 3 - len(strongest)))),
            surface.max(axis=0),
            (surface * weights[:, None]).sum(axis=0) / weights.sum(),
            _shares(pair_probs, weights, relations),
        ]
    ).astype(np.float32)


def _shares(pair_probs: Array, weights: Array, relations: Sequence[str]) -> Array:
    """Of the pairs' "related somehow" mass (weighted like the pair readings): the share that
    is agreement and the share that is a conflict (context, change, sources), and the least
    agreement share of a pair read as related. A linear model cannot form these ratios from
    the sums itself; they say whether related memories mostly agree."""
    col = {r: j for j, r in enumerate(relations)}
    related = 1.0 - pair_probs[:, col["unrelated"]] if "unrelated" in col else pair_probs.sum(1)
    agree = pair_probs[:, col["agree"]] if "agree" in col else np.zeros(len(pair_probs))
    conflict = sum(
        (pair_probs[:, col[r]] for r in _CONFLICTS if r in col), np.zeros(len(pair_probs))
    )
    mass = float((weights * related).sum())
    if mass < 1e-6:
        return np.zeros(3, dtype=np.float32)
    close = related >= 0.5
    least = float(np.min(agree[close] / related[close])) if close.any() else 1.0
    return np.array(
        [float((weights * agree).sum()) / mass, float((weights * conflict).sum()) / mass, least],
        dtype=np.float32,
    )


_CONFLICTS = ("context_partition", "temporal_change", "source_contradiction")
