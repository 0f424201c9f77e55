"""The ``rules`` relation layer: today's lexical cues behind the relation-layer interface.

A baseline: hand-written cue lists and regular expressions (:mod:`caap.conflict_graph._text`),
tuned on text written alongside them. Every probability it gives is 0 or 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from caap.conflict_graph import _text
from caap.conflict_graph.extractor import Extraction, OfflineExtractor
from caap.conflict_graph.relations import (
    Facets,
    MemoryView,
    PairVerdict,
    Relation,
    RiskVerdict,
)
from caap.conflict_graph.rules import GraphConfig, Node, pair_edge, risk_tier
from caap.conflict_graph.stale import about_someone_else, invalidation_certain, is_change_event
from caap.models import EdgeKind

__all__ = ["RulesRelations", "facets_from_extraction"]

_RELATION_OF: dict[EdgeKind, Relation] = {
    EdgeKind.CORROBORATES: "agree",
    EdgeKind.CONTEXT_PARTITION: "context_partition",
    EdgeKind.SOURCE_CONTRADICTION: "source_contradiction",
}


_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|myself)\b", re.I)


def attribution(text: str, ext: Extraction) -> float:
    """How sure the cues are that someone other than the user is speaking: 1 with a source
    found; 0 for the user's own words (first person, about themselves); 0.5 otherwise (no
    source found is not evidence that it is the user's own account)."""
    if ext.source is not None:
        return 1.0
    if _FIRST_PERSON.search(text) and not about_someone_else(text):
        return 0.0
    return 0.5


def facets_from_extraction(text: str, ext: Extraction) -> Facets:
    """An extraction with the rule cues' (certain) confidences and change flags."""
    if isinstance(ext, Facets):
        return ext
    return Facets(
        **{f: getattr(ext, f) for f in Extraction.__dataclass_fields__},
        source_confidence=attribution(text, ext),
        context_confidence=float(ext.context is not None),
        time_confidence=float(bool({"time", "return", "change"} & set(ext.cues))),
        change_event=is_change_event(text),
        certain=invalidation_certain(text),
        about_other=about_someone_else(text),
    )


def context_similarity(a: str | None, b: str | None) -> float | None:
    """Word overlap of two stated contexts (``None`` when either is missing or empty).

    Overlap coefficient: "at home" and "at home with the kids" are the same situation.
    """
    if not a or not b:
        return None
    wa, wb = set(_text.content_words(a)), set(_text.content_words(b))
    if not wa or not wb:
        return None
    return len(wa & wb) / max(min(len(wa), len(wb)), 1)


def _node(v: MemoryView) -> Node:
    return Node(v.id, v.text, v.source, v.context, v.observed_at, v.order, v.facets)


class RulesRelations:
    """Relation layer over hand-written cues (the baseline).

    ``relate`` says ``agree``, ``source_contradiction`` or ``context_partition`` as
    :func:`caap.conflict_graph.rules.pair_edge` does, else ``unrelated``: the rules read
    temporal change and stale state from a whole aspect's timeline, not from pairs.

    Args:
        config: Thresholds (value similarity that counts as agreement, context similarity
            that counts as one context).
    """

    name = "rules"

    def __init__(self, config: GraphConfig | None = None) -> None:
        self.config = config or GraphConfig()
        self._extractor = OfflineExtractor()

    def facets(self, texts: Sequence[str], *, subject: set[str] | None = None) -> list[Facets]:
        """Facets from lexical cues and date parsing."""
        return [
            facets_from_extraction(t, self._extractor.extract(t, subject=subject)) for t in texts
        ]

    def relate(self, pairs: Sequence[tuple[MemoryView, MemoryView]]) -> list[PairVerdict]:
        """Rule verdicts; value similarity is read off the views' vectors (0 without)."""
        out = []
        for a, b in pairs:
            sim = (
                float(a.vector @ b.vector) if a.vector is not None and b.vector is not None else 0.0
            )
            found = pair_edge(
                _node(a), _node(b), sim, context_similarity(a.context, b.context), self.config
            )
            if found is None:
                out.append(PairVerdict.certain("unrelated", "no pairwise cue"))
            else:
                kind, evidence = found
                out.append(PairVerdict.certain(_RELATION_OF[kind], evidence))
        return out

    def risk(self, query: str, texts: Sequence[str]) -> RiskVerdict:
        """Risk from keyword categories (one hit in the query, two across the memories)."""
        tier, cats = risk_tier(texts, query)
        return RiskVerdict(tier, 1.0, tuple(cats))
