"""Facet extraction: fill what the caller did not say (caller facets always win).

The offline extractor uses lexical cues and date parsing (no network, no model); aspects are
assigned by the graph from embeddings, since they depend on the user's other memories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from caap.conflict_graph import _text

__all__ = ["Extraction", "Extractor", "OfflineExtractor"]


@dataclass(frozen=True)
class Extraction:
    """What one memory's text says beyond its words."""

    source: str | None = None
    """Who/what asserts it, if named (``None``: the user's own statement)."""
    context: str | None = None
    """Condition clause under which it holds, if stated."""
    value: str = ""
    """The claim itself: the text without the subject's name, dates and attribution."""
    observed_at: datetime | None = None
    """When it held in the world, if the text gives an absolute date."""
    duration: str | None = None
    """How long it lasted, if stated ("three weeks")."""
    returns: bool = False
    """The text says a behaviour went back to an earlier state."""
    changes: bool = False
    """The text says a state changed."""
    negated: bool = False
    """The claim is phrased negatively (never, no longer, skips, avoids...)."""
    cues: tuple[str, ...] = field(default_factory=tuple)
    """Names of the cues that fired, for explanations."""


@runtime_checkable
class Extractor(Protocol):
    """Anything that turns a text into an :class:`Extraction`."""

    def extract(self, text: str, *, subject: set[str] | None = None) -> Extraction:
        """Extract facets from ``text``; ``subject`` holds the user's own name tokens."""
        ...


_NEGATION = (
    " not ",
    "n't ",
    " never ",
    " no ",
    " none ",
    " skips ",
    " skipped ",
    " avoids ",
    " avoided ",
    " refuses ",
    " refused ",
    " stopped ",
    " quit ",
    " without ",
    " no longer ",
    " contraindicated",
    " against ",
    " banned ",
    " forbidden ",
    " denied ",
)


class OfflineExtractor:
    """Deterministic extractor over lexical cues and date parsing."""

    def extract(self, text: str, *, subject: set[str] | None = None) -> Extraction:
        """Extract facets from ``text``; see :class:`Extraction`."""
        subject = subject or set()
        time = _text.find_time(text)
        source = _text.find_source(text, subject)
        context = _text.find_context(text)
        spans = list(time.spans)
        m = _text._ACCORDING.search(text)
        if m:
            spans.append(m.span())
        value = _text.mask_names(_text.strip_spans(text, _text.widen_spans(text, spans)), subject)
        low = f" {text.lower()} "
        cues = []
        if source:
            cues.append("source")
        if context:
            cues.append("context")
        if time.when or time.duration or _text.has_time_cue(text):
            cues.append("time")
        returns, changes = _text.has_return_cue(text), _text.has_change_cue(text)
        if returns:
            cues.append("return")
        if changes:
            cues.append("change")
        return Extraction(
            source=source,
            context=context,
            value=value or text,
            observed_at=time.when,
            duration=time.duration,
            returns=returns,
            changes=changes,
            negated=any(n in low for n in _NEGATION),
            cues=tuple(cues),
        )
