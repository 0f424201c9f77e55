"""The ``learned`` relation layer: small fitted models over the packaged sentence embeddings.

Inference is numpy over weights shipped as package data
(``caap/data/relations_learned.npz``, with a JSON card recording the training data's checksum,
the seed and the dev metrics), plus one MiniLM forward pass (torch) per pair not read before,
by the pair reader (``caap/data/pair_reader.npz``). Train your own with ``caap relations train
--data DIR --out FILE`` and load them with ``LearnedRelations(weights=FILE)``.

What is learned: the pair relation (a softmax over
:data:`~caap.conflict_graph.relations.RELATIONS`, reading among its inputs the pair reader's
probabilities: the packaged MiniLM as a cross-encoder over both texts,
:mod:`caap.conflict_graph._pair_reader`) and the query risk (probability of high stakes).
Facet *spans* (the source's name, the condition clause, absolute dates) are still read by the
offline extractor, since the graph needs them as strings for sides and time order; whether two
memories conflict and how is the pair model's call, with the pair reader's own reading
multiplied in (:data:`READER_BLEND`). Who a memory's claim comes from, as the
guard's first-hand test needs it, is also read by the speaker head
(:mod:`caap.conflict_graph._speaker`, ``caap/data/speaker_head.npz``) where it is sure.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from caap._embeddings import Embedder, get_embedder
from caap.conflict_graph._pair_reader import PairReader, default_reader_path
from caap.conflict_graph._relations_features import (
    FACET_CLASSES,
    N_PAIR_TAIL,
    N_READER,
    SITUATION_K,
    SITUATIONS,
    nested_values_read,
    pair_features,
    risk_features,
    scale_odds,
    situation_features,
    text_features,
)
from caap.conflict_graph._relations_rules import facets_from_extraction
from caap.conflict_graph._speaker import SpeakerHead
from caap.conflict_graph.extractor import OfflineExtractor
from caap.conflict_graph.relations import (
    RELATIONS,
    Facets,
    MemoryView,
    PairVerdict,
    RiskVerdict,
    SituationVerdict,
)
from caap.conflict_graph.rules import GraphConfig
from caap.models import RiskTier

__all__ = ["AGREE_WEIGHT", "LearnedRelations", "default_weights_path"]

Array = npt.NDArray[np.float32]


def _softmax(z: Array) -> Array:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    out: Array = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


def default_weights_path() -> Path:
    """The weights shipped with caap."""
    return Path(str(resources.files("caap") / "data" / "relations_learned.npz"))


_readers: dict[Path, PairReader] = {}
_readers_lock = threading.Lock()


def _reader_path(weights: Path, card: dict[str, Any]) -> Path:
    """Where the pair reader the weights were trained with is: the file their card names,
    relative to the weights, else the shipped one. Weights copied away from the reader they
    name (the card keeps the path from where they were written) still find it when a file of
    the same name beside them, or the shipped reader, has the checksum the card records."""
    meta = card.get("pair_reader") or {}
    name = meta.get("file")
    if not name:
        return default_reader_path()
    path: Path = weights.parent / str(name)
    if path.exists():
        return path
    digest = meta.get("sha256")
    for other in (weights.parent / Path(str(name)).name, default_reader_path()):
        if digest and other.exists() and hashlib.sha256(other.read_bytes()).hexdigest() == digest:
            return other
    raise ValueError(
        f"weights {weights} name the pair reader {path}, which does not exist, and no reader "
        f"with the checksum their card records is beside them or shipped; put the reader "
        f"they were trained with (--reader) at that path or beside the weights"
    )


def _reader_for(weights: Path, card: dict[str, Any]) -> PairReader:
    """The pair reader the weights were trained with (:func:`_reader_path`); one instance per
    file in the process."""
    path = _reader_path(weights, card)
    with _readers_lock:
        key = path.resolve()
        if key not in _readers:
            _readers[key] = PairReader(path)
        return _readers[key]


#: Odds factor on agreement in the verdicts :meth:`LearnedRelations.relate` gives (the graph's
#: edges, the stale successor). The pair model is fitted with balanced classes, which puts
#: agreement, the commonest related reading among its training pairs (631, against 177
#: source contradictions and 296 changes), on a par with each kind of conflict, and agreeing
#: controls were typed as conflicts. Chosen on blind dev among 1, 4 and 8 (acceptable actions
#: 50, 51 and 51 of 60, the same actions for 4 and 8; blind extra 51, 52, 52 of 64). The
#: situation model reads the model's own odds, and so does the guard's agreement reading
#: (each verdict carries the factor as ``agree_odds``, which
#: :func:`caap.policy._analysis._agreement` divides back out, also when another layer passes
#: the verdict on as its fallback), so the factor never makes positive evidence for a
#: high-stakes commit.
AGREE_WEIGHT = 4.0

#: Weight of the pair reader's own reading in the pair verdicts :meth:`LearnedRelations.relate`
#: gives: their probabilities are the pair model's and the reader's multiplied together,
#: ``model ** (1 - w) * reader ** w`` (renormalised). The pair model reads the reader's
#: probabilities as 7 of its 1,196 input columns (most of the rest describe each text's
#: embedding), fitted on text that implies its situations; on conditions written out ("...
#: when he has an early shift") it reads such pairs as agreeing where the reader, which reads
#: the two texts token against token, reads more of them as conflicts (on the frozen
#: ``pairs_conditions/test`` pairs, conflicting ones read as agreeing: pair model 30 of 48,
#: reader alone 7). Chosen on the macro F1 of the edge verdicts (the agreement factor in) over
#: the 656 pairs ``caap relations train`` reads from blind dev, among 0, 0.25, 0.4, 0.5, 0.6,
#: 0.75 and 1: 0.580, 0.586, 0.592, 0.588, 0.583, 0.578, 0.569 (``docs/benchmark.md``, "The
#: pair reader's own reading in the verdicts"). The situation model reads the pair model's own
#: probabilities, as it was fitted.
READER_BLEND = 0.4

_KEYS = (
    "pair_w",
    "pair_b",
    "pair_mu",
    "pair_sd",
    "risk_w",
    "risk_b",
    "risk_mu",
    "risk_sd",
    "risk_high",
    "risk_medium",
    "facet_w",
    "facet_b",
    "facet_mu",
    "facet_sd",
)
#: Arrays of the situation model; weights trained before it existed lack them.
_SITUATION_KEYS = ("sit_w", "sit_b", "sit_mu", "sit_sd")
#: Thresholds for the risk of memories read without a query (a cluster's risk); weights
#: trained before they existed use the query thresholds for both.
_CLUSTER_RISK_KEYS = ("risk_high_cluster", "risk_medium_cluster")


class LearnedRelations:
    """Relation layer over fitted models (see module doc).

    Args:
        config: Unused (accepted so every layer is built the same way).
        weights: An ``.npz`` written by ``caap relations train`` (default: the shipped one).
        embedder: Sentence embedder (default: the packaged all-MiniLM-L6-v2); must be the
            one the weights were trained with.
        reader: The pair reader whose probabilities the pair model reads (default: the one
            the weights' card names, else the shipped one); must be the one they were
            trained with.

    Raises:
        ValueError: the weights file lacks an array or does not fit the embedder.
    """

    name = "learned"
    pairwise = True
    """Temporal change, supersession and invalidation are judged pair by pair."""

    def __init__(
        self,
        config: GraphConfig | None = None,
        *,
        weights: str | Path | None = None,
        embedder: Embedder | None = None,
        reader: PairReader | None = None,
    ) -> None:
        self.config = config or GraphConfig()
        self.weights_path = Path(weights) if weights is not None else default_weights_path()
        with np.load(self.weights_path) as z:
            missing = [k for k in _KEYS if k not in z.files]
            if missing:
                raise ValueError(f"weights {self.weights_path} lack arrays {missing}")
            self._w: dict[str, Any] = {k: np.asarray(z[k]) for k in _KEYS}
            if all(k in z.files for k in _SITUATION_KEYS):
                self._w.update({k: np.asarray(z[k]) for k in _SITUATION_KEYS})
                if "sit_prior" in z.files:  # written by `caap relations calibrate`
                    self._w["sit_prior"] = np.asarray(z["sit_prior"], dtype=np.float32)
            for key, fallback in zip(_CLUSTER_RISK_KEYS, ("risk_high", "risk_medium"), strict=True):
                self._w[key] = np.asarray(z[key] if key in z.files else z[fallback])
        card = self.weights_path.with_suffix(".json")
        self.card: dict[str, Any] = json.loads(card.read_text()) if card.exists() else {}
        self.embedder = embedder or get_embedder()
        self.reader = reader or _reader_for(self.weights_path, self.card)
        dim = self.embedder.dimension
        if self._w["risk_w"].shape[0] != 2 * dim:
            raise ValueError(
                f"weights {self.weights_path} were trained for {self._w['risk_w'].shape[0] // 2}"
                f"-dimensional embeddings, the embedder gives {dim}"
            )
        # Weights written for another feature layout (an older caap) cannot be read: say so.
        zero = np.zeros((1, dim), dtype=np.float32)
        expected = {
            "pair_mu": pair_features(zero, zero, [""], [""]).shape[1],
            "sit_mu": situation_features(
                np.zeros(2, dtype=np.float32),
                np.zeros((1, len(RELATIONS)), dtype=np.float32),
                np.zeros((2, len(FACET_CLASSES)), dtype=np.float32),
                RELATIONS,
            ).shape[0],
        }
        for key, n in expected.items():
            if key in self._w and self._w[key].shape[0] != n:
                raise ValueError(
                    f"weights {self.weights_path} have {self._w[key].shape[0]} {key[:-3]} "
                    f"features, this caap computes {n}: retrain them with `caap relations train`"
                )
        #: Odds factor on agreement in :meth:`relate`'s verdicts (:data:`AGREE_WEIGHT`).
        self.agree_weight = AGREE_WEIGHT
        #: Weight of the pair reader's reading in :meth:`relate`'s verdicts (:data:`READER_BLEND`).
        self.reader_blend = READER_BLEND
        # Who speaks (the guard's first-hand reading); absent weights leave the earlier one.
        self.speaker: SpeakerHead | None = None
        try:
            self.speaker = SpeakerHead(dimension=dim)
        except (OSError, ValueError):
            self.speaker = None
        self._extractor = OfflineExtractor()
        self._vectors: OrderedDict[str, Array] = OrderedDict()
        self._lock = threading.Lock()

    # -- embeddings, cached per text (a memory is paired many times) ---------------------
    def _embed(self, texts: Sequence[str]) -> Array:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            fresh = self.embedder.encode(missing)
            with self._lock:
                for t, v in zip(missing, fresh, strict=True):
                    self._vectors[t] = v
                while len(self._vectors) > 50_000:
                    self._vectors.popitem(last=False)
        with self._lock:
            rows = [self._vectors[t] for t in texts]
        if not rows:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack(rows)

    def cached_vectors(self, texts: Sequence[str]) -> dict[str, Array]:
        """The embeddings of ``texts`` this layer already computed (by its :attr:`embedder`),
        so a graph using the same embedder need not embed them again."""
        with self._lock:
            return {t: self._vectors[t] for t in texts if t in self._vectors}

    # -- the interface --------------------------------------------------------------------
    def facet_probabilities(self, texts: Sequence[str]) -> Array:
        """Per text, the facet model's probabilities over
        :data:`~caap.conflict_graph._relations_features.FACET_CLASSES`."""
        if not texts:
            return np.zeros((0, len(FACET_CLASSES)), dtype=np.float32)
        x = text_features(self._embed(texts), texts)
        z = ((x - self._w["facet_mu"]) / self._w["facet_sd"]) @ self._w["facet_w"]
        return _softmax(z + self._w["facet_b"])

    def facets(self, texts: Sequence[str], *, subject: set[str] | None = None) -> list[Facets]:
        """Facet spans (names, condition clauses, dates) from the offline extractor, with the
        facet model's confidences that a memory is attributed, conditional or time-ordered.
        The texts are embedded here in one batch, so the pairs typed next find them cached."""
        probs = self.facet_probabilities(texts)
        first_hand = (
            self.speaker.first_hand(self._embed(texts))
            if self.speaker is not None and texts
            else np.zeros(len(texts), dtype=np.float32)
        )
        clear_at = self.speaker.threshold if self.speaker is not None else 2.0
        out = []
        for t, p, fh in zip(texts, probs, first_hand, strict=True):
            base = facets_from_extraction(t, self._extractor.extract(t, subject=subject))
            attributed = max(float(p[FACET_CLASSES.index("attributed")]), base.source_confidence)
            if float(fh) >= clear_at:
                # The speaker head reads the claim as the user's own or a record's.
                attributed = min(attributed, 1.0 - float(fh))
            out.append(
                replace(
                    base,
                    context_confidence=float(p[FACET_CLASSES.index("conditional")]),
                    time_confidence=float(p[FACET_CLASSES.index("time_ordered")]),
                    # Someone else's account if the cues or the facet model say so, unless
                    # the speaker head (caap.conflict_graph._speaker, fitted on who-speaks
                    # labels) positively reads it as first-hand. (Letting the facet model
                    # alone clear an unsourced memory put three unsafe commits on the blind
                    # test split: its "attributed" label is learned from conflict types.)
                    source_confidence=attributed,
                )
            )
        return out

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> Array:
        """Relation probabilities (rows in :data:`RELATIONS` order) for pairs of texts: the pair
        model's, multiplied with the pair reader's (:data:`READER_BLEND`)."""
        probs, tail = self._pair_reading(pairs)
        w = self.reader_blend
        if w == 0.0 or not len(probs):
            return probs
        logp = (1.0 - w) * np.log(probs + 1e-9) + w * np.log(tail[:, :N_READER] + 1e-9)
        return _softmax(logp)

    def _pair_reading(self, pairs: Sequence[tuple[str, str]]) -> tuple[Array, Array]:
        """The pair model's probabilities and the pairs' direct comparisons (the pair
        reader's probabilities and the surface signals: the last :data:`N_PAIR_TAIL` columns
        of its input), from one feature computation."""
        if not pairs:
            return (
                np.zeros((0, len(RELATIONS)), dtype=np.float32),
                np.zeros((0, N_PAIR_TAIL), dtype=np.float32),
            )
        ta, tb = [a for a, _ in pairs], [b for _, b in pairs]
        x = pair_features(
            self._embed(ta),
            self._embed(tb),
            ta,
            tb,
            self.facet_probabilities(ta),
            self.facet_probabilities(tb),
            self.reader.probabilities(list(pairs)),
        )
        z = ((x - self._w["pair_mu"]) / self._w["pair_sd"]) @ self._w["pair_w"]
        return _softmax(z + self._w["pair_b"]), x[:, -N_PAIR_TAIL:]

    def relate(self, pairs: Sequence[tuple[MemoryView, MemoryView]]) -> list[PairVerdict]:
        """One verdict per pair from the pair model and the pair reader (:meth:`probabilities`;
        one batched forward pass)."""
        texts = [(a.text, b.text) for a, b in pairs]
        probs = nested_values_read(self.probabilities(texts), texts)
        if self.agree_weight != 1.0:
            probs = scale_odds(probs, "agree", self.agree_weight)
        out = []
        for row in probs:
            verdict = PairVerdict.from_probs(dict(zip(RELATIONS, row.tolist(), strict=True)))
            runner = sorted(RELATIONS, key=lambda r: -verdict.probs[r])[1]
            out.append(
                PairVerdict(
                    verdict.probs,
                    verdict.relation,
                    verdict.confidence,
                    f"pair model: {verdict.relation.replace('_', ' ')} "
                    f"{verdict.confidence:.2f} (next {runner.replace('_', ' ')} "
                    f"{verdict.probs[runner]:.2f})",
                    agree_odds=self.agree_weight,
                )
            )
        return out

    def high_risk_probability(self, query: str, texts: Sequence[str]) -> float:
        """Probability that acting wrongly on ``query`` over ``texts`` is costly."""
        dim = self.embedder.dimension
        qv = self._embed([query])[0] if query.strip() else np.zeros(dim, dtype=np.float32)
        mats = self._embed(list(dict.fromkeys(texts)))
        x = risk_features(qv, mats)
        z = float(((x - self._w["risk_mu"]) / self._w["risk_sd"]) @ self._w["risk_w"])
        z += float(self._w["risk_b"])
        return float(1.0 / (1.0 + np.exp(-z)))

    def risk(self, query: str, texts: Sequence[str]) -> RiskVerdict:
        """HIGH at or above the dev-chosen threshold, MEDIUM within half of it, else LOW.

        A reading with a query and one of memories alone (a cluster's risk) differ in what
        they see, so each has its own thresholds, both chosen on dev to catch every high-risk
        example of their kind.
        """
        p = self.high_risk_probability(query, texts)
        suffix = "" if query.strip() else "_cluster"
        if p >= float(self._w["risk_high" + suffix]):
            return RiskVerdict(RiskTier.HIGH, p, ("risk model",))
        if p >= float(self._w["risk_medium" + suffix]):
            return RiskVerdict(RiskTier.MEDIUM, p, ("risk model",))
        return RiskVerdict(RiskTier.LOW, 1.0 - p)

    @property
    def reads_situations(self) -> bool:
        """Whether the weights carry a situation model (see :meth:`situation`)."""
        return "sit_w" in self._w

    def situation(self, query: str, texts: Sequence[str]) -> SituationVerdict | None:
        """How the memories nearest ``query`` stand to each other, as probabilities over
        :data:`~caap.conflict_graph._relations_features.SITUATIONS` (``None`` when the weights
        have no situation model, or there is no query or memory).

        Reads the :data:`SITUATION_K` memories of ``texts`` most similar to the query, their
        pair and facet readings, and the similarities, the way it was trained.
        """
        if not self.reads_situations or not query.strip() or not texts:
            return None
        texts = list(dict.fromkeys(texts))
        mat = self._embed(texts)
        sims = mat @ self._embed([query])[0]
        order = np.argsort(-sims, kind="stable")[:SITUATION_K]
        top = [texts[int(j)] for j in order]
        pairs = [(top[a], top[b]) for a in range(len(top)) for b in range(a + 1, len(top))]
        if not pairs:
            # A situation is how memories stand to each other: one memory has none. (Fitted on
            # instances of five or more memories, the model read an oscillation into one.)
            return None
        pair_probs, surface = self._pair_reading(pairs)
        pair_probs = nested_values_read(pair_probs, pairs)
        x = situation_features(
            sims[order], pair_probs, self.facet_probabilities(top), RELATIONS, surface
        )
        z = ((x - self._w["sit_mu"]) / self._w["sit_sd"]) @ self._w["sit_w"] + self._w["sit_b"]
        z = z.reshape(1, -1).astype(np.float32)
        p = _softmax(z)[0]
        probs = dict(zip(SITUATIONS, (float(v) for v in p), strict=True))
        unshifted = None
        if "sit_prior" in self._w:
            # A prior shift fitted on text the models never saw (`caap relations calibrate`):
            # the policy decides on the shifted reading, the guard reads the model's own.
            unshifted = probs
            shifted = _softmax(z + self._w["sit_prior"].reshape(1, -1))[0]
            probs = dict(zip(SITUATIONS, (float(v) for v in shifted), strict=True))
        best = max(probs, key=lambda k: probs[k])
        return SituationVerdict(
            probs, f"situation model: {best} {probs[best]:.2f}", unshifted=unshifted
        )
