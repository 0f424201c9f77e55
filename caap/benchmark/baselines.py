"""Fixed-policy baselines of the TANGLE harness (DESIGN §7).

Each baseline is a :class:`~caap.policy.base.Policy` with one fixed rule and no conflict
reasoning; each sees only the memory texts (and facets, if any) and the query, never a role or
an annotation. They exist to show what a single rule gets right and where it fails:

=========================  ===================================================  ==============
name                       rule                                                 action
=========================  ===================================================  ==============
``direct``                 restate the memory most relevant to the query        commit
``recency``                restate the most recent relevant memory              commit
``majority``               group relevant memories by a value signature, take   commit
                           the largest group
``source_priority``        record/log > professional > family/third party >     commit
                           self-report
``always_ask``             ask a generic question, answer nothing               clarify
``always_conditionalize``  list the relevant memories as if/then branches       conditionalize
``lexical``                clarify when two relevant memories show a surface    clarify, else
                           opposition cue (negation, always/never, ...)         commit
=========================  ===================================================  ==============

*Relevant* memories are the ``top_k`` most similar to the query: by sentence-embedding cosine
(``relevance="embedding"``, the default, using :func:`caap._embeddings.get_embedder`) or by
shared content words (``relevance="lexical"``, no model). Ties keep the given order, so every
baseline is deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from caap._embeddings import DEFAULT_MODEL, get_embedder
from caap.benchmark.registry import policy
from caap.conflict_graph._text import content_words, find_source, find_time, mask_names
from caap.conflict_graph._text import subject_names as _subject_names
from caap.models import Action, Decision, Memory, Response

__all__ = [
    "GENERIC_QUESTION",
    "AlwaysAskPolicy",
    "AlwaysConditionalizePolicy",
    "Baseline",
    "DirectPolicy",
    "LexicalConflictPolicy",
    "MajorityPolicy",
    "RecencyPolicy",
    "SourcePriorityPolicy",
    "opposition_cue",
    "source_tier",
]

GENERIC_QUESTION = "Could you tell me more about your situation?"
"""The question ``always_ask`` (and ``lexical``, on a detected opposition) asks."""

Relevance = Literal["embedding", "lexical"]


def _stems(text: str, drop: set[str] | None = None) -> set[str]:
    """Content words with a light plural strip, cut to 7 letters (``eggs`` ~ ``egg``)."""
    words = set()
    for w in content_words(text.replace("-", " ")):
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        words.add(w[:7])
    return words - drop if drop else words


class Baseline:
    """Shared machinery: relevance ranking and the shape of a committed answer.

    Args:
        relevance: ``"embedding"`` (cosine of sentence embeddings) or ``"lexical"`` (shared
            content words with the query).
        top_k: How many memories count as relevant.
        embedding_model: Sentence-transformers model for ``relevance="embedding"``.
    """

    name = "baseline"

    def __init__(
        self,
        *,
        relevance: Relevance = "embedding",
        top_k: int = 7,
        embedding_model: str = DEFAULT_MODEL,
    ) -> None:
        """Configure relevance; no model is loaded until the first :meth:`respond`."""
        if relevance not in ("embedding", "lexical"):
            raise ValueError(f"relevance must be 'embedding' or 'lexical', got {relevance!r}")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k!r}")
        self.relevance = relevance
        self.top_k = top_k
        self.embedding_model = embedding_model

    # -- relevance -----------------------------------------------------------------------------
    def relevant(self, memories: Sequence[Memory], query: str) -> list[Memory]:
        """The ``top_k`` memories most related to ``query``, best first (ties: given order)."""
        mems = list(memories)
        if not mems:
            return []
        names = _subject_names([m.text for m in mems])
        if self.relevance == "lexical":
            q = _stems(query)
            scores = [float(len(q & _stems(m.text, {n.lower() for n in names}))) for m in mems]
            if not any(scores):
                return mems[: self.top_k]
        else:
            embedder = get_embedder(self.embedding_model)
            vecs = embedder.encode([mask_names(m.text, names) or m.text for m in mems])
            qv = embedder.encode_one(query)
            scores = [float(x) for x in vecs @ qv]
        order = sorted(range(len(mems)), key=lambda i: -scores[i])
        return [mems[i] for i in order[: self.top_k]]

    # -- output ----------------------------------------------------------------------------------
    def commit(
        self, memory: Memory, *, lead: str, label: str, rationale: str, extra: Sequence[str] = ()
    ) -> Response:
        """A committed answer that restates ``memory`` as the recommendation."""
        text = f'{lead} "{memory.text.strip()}" I\'d plan around that.'
        decision = Decision(
            action=Action.COMMIT,
            evidence={label: [memory.id, *extra]},
            rationale=f"{self.name}: {rationale}",
            backbone="baseline",
        )
        return Response(text=text, decision=decision, cited_memory_ids=[memory.id, *extra])

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Answer ``query`` from ``memories`` with this baseline's rule."""
        raise NotImplementedError

    def _nothing(self) -> Response:
        decision = Decision(
            action=Action.CLARIFY,
            rationale=f"{self.name}: no memories to answer from",
            backbone="baseline",
        )
        return Response(
            text=f"I don't have anything on this yet. {GENERIC_QUESTION}",
            decision=decision,
            questions=[GENERIC_QUESTION],
        )


class DirectPolicy(Baseline):
    """Answer from the single most relevant memory, with no conflict policy at all."""

    name = "direct"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Restate the top memory as the recommendation (commit)."""
        ranked = self.relevant(memories, query)
        if not ranked:
            return self._nothing()
        top = ranked[0]
        return self.commit(
            top,
            lead="Going by what you've told me:",
            label="answer",
            rationale=f"restates the memory most relevant to the query ({self.relevance})",
        )


def _when(memory: Memory) -> datetime | None:
    if memory.observed_at is not None:
        return memory.observed_at
    return find_time(memory.text).when


class RecencyPolicy(Baseline):
    """Commit to the most recent relevant memory (the BOC baseline: "the newest phase holds").

    Time is ``observed_at`` or the first absolute date in the text; undated memories count as
    older than dated ones; ties go to the one given last.
    """

    name = "recency"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Restate the newest relevant memory (commit)."""
        ranked = self.relevant(memories, query)
        if not ranked:
            return self._nothing()
        position = {m.id: i for i, m in enumerate(memories)}
        floor = datetime.min.replace(tzinfo=timezone.utc)
        newest = max(ranked, key=lambda m: (_when(m) or floor, position[m.id]))
        when = _when(newest)
        stamp = when.date().isoformat() if when else "undated"
        return self.commit(
            newest,
            lead="The most recent thing I have on this:",
            label="most_recent",
            rationale=f"newest of {len(ranked)} relevant memories ({stamp})",
        )


_NEGATION = re.compile(
    r"\b(not|never|no|none|nothing|without|stopped|stops|quit|skips?|skipped|avoids?|avoided|"
    r"refuses?|refused|dropped|no longer|cut out|gave up|\w+n't)\b",
    re.IGNORECASE,
)


def _signature(memory: Memory, drop: set[str]) -> frozenset[str]:
    return frozenset(_stems(memory.text, drop))


class MajorityPolicy(Baseline):
    """Commit to what most relevant memories say (the CPC baseline: "the usual case wins").

    The value signature of a memory is its content words minus the query's, the user's name
    and words shared by all relevant memories, plus its polarity (negated or
    not). Memories join one group when they have the same polarity and share a signature word
    (single link). The largest group wins; ties go to the group holding the
    most relevant memory.
    """

    name = "majority"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Restate the best-ranked memory of the largest group (commit)."""
        ranked = self.relevant(memories, query)
        if not ranked:
            return self._nothing()
        names = {n.lower() for n in _subject_names([m.text for m in memories])}
        drop = _stems(query) | names
        counts: dict[str, int] = {}
        for m in ranked:
            for s in _stems(m.text, drop):
                counts[s] = counts.get(s, 0) + 1
        # Words every relevant memory shares are the topic, not a value.
        drop |= {s for s, c in counts.items() if len(ranked) >= 3 and c == len(ranked)}
        sigs = [_signature(m, drop) for m in ranked]
        neg = [bool(_NEGATION.search(m.text)) for m in ranked]
        group = list(range(len(ranked)))

        def find(i: int) -> int:
            while group[i] != i:
                group[i] = group[group[i]]
                i = group[i]
            return i

        for i in range(len(ranked)):
            for j in range(i + 1, len(ranked)):
                if neg[i] == neg[j] and sigs[i] & sigs[j]:
                    group[find(j)] = find(i)
        members: dict[int, list[int]] = {}
        for i in range(len(ranked)):
            members.setdefault(find(i), []).append(i)
        # Largest group; ties -> the group whose best member ranks highest.
        best = max(members.values(), key=lambda g: (len(g), -min(g)))
        top = ranked[min(best)]
        others = [ranked[i].id for i in sorted(best) if ranked[i].id != top.id]
        return self.commit(
            top,
            lead=f"Most of what I have points the same way ({len(best)} of {len(ranked)} "
            "related memories), for example:",
            label="majority",
            rationale=f"largest of {len(members)} value groups ({len(best)} of {len(ranked)})",
            extra=others,
        )


_TIER_NAMES = ("record", "professional", "family/third party", "self-report")
_TIER_PATTERNS = (
    r"record|records|log|logs|letter|note|notes|report|file|chart|portal|receipts?|statements?|"
    r"card|summary|label|history|dashboard|system|memo|order|transcript|invoices?|agreement|"
    r"spreadsheet|diary|app|register|registry|database|e-?mail|document|form|list|certificate|"
    r"minutes|contract|lease|survey|policy|handbook|calendar|sheet|readings?|printout|ticket|"
    r"paperwork|worksheet|notice|audit|faq|page|plan|stubs?|org chart|data|leaflet|booklet|"
    r"brochure|handout|guide|manual|website|tracker|watch|smartwatch",
    r"doctor|gp|physician|surgeon|nurse|physio\w*|pharmacist|allergist|\w+ologist|specialist|"
    r"consultant|dentist|therapist|teacher|school|principal|coach|bank|teller|banker|clinic|"
    r"hospital|accountant|lawyer|attorney|solicitor|agent|advis[oe]r|coordinator|officer|clerk|"
    r"rep|representative|manager|director|supervisor|hr|it|helpdesk|landlord|vet|caseworker|"
    r"court|registrar|inspector|surveyor|contractor|trainer|dietitian|pharmacy|irs|finance|"
    r"controller|cfo|secretary|assistant|staff|team|vendor|reseller|office|company|agency",
    r"mother|father|mom|mum|dad|parents?|sister|brother|wife|husband|partner|spouse|son|daughter|"
    r"aunt|uncle|cousin|grand\w+|friend|roommate|flatmate|neighbou?r|teammate|colleague|"
    r"co-?worker|ex-\w+|boyfriend|girlfriend|fianc\w+|in-laws?|sibling|relatives?",
)
_TIER_RX = [re.compile(rf"\b(?:{p})\b", re.IGNORECASE) for p in _TIER_PATTERNS]
# Verbs that end the source phrase. Words that are also record nouns ("records", "notes",
# "report") count as verbs only before an object ("lists a", "records that").
_REPORT_VERB = re.compile(
    r"\b(?:says?|said|shows?|showed|told|tells|recalls?|states?|stated|asks?|recommends?|"
    r"prescribes?|increases?|wrote|writes|gave|remembers?|insists?|admits?|believes?|thinks?|"
    r"remarked|emailed|texted|confirms?|logged|claims?|claimed|mentions?|mentioned|"
    r"(?:records?|recorded|notes?|noted|reports?|reported|lists?|listed|counts?|names?)"
    r"(?=\s+(?:that|a|an|the|only|no|his|her|their|its|\d)\b))\b"
)


def source_tier(text: str, subject: set[str] | None = None) -> tuple[int, str]:
    """Priority tier of who or what asserts ``text``: 0 record/log, 1 professional,
    2 family/third party, 3 self-report; with the source phrase it was read from.

    The phrase is the words before the first reporting verb ("says", "shows", "told", ...), or
    the first six words when there is none. Up to its first comma
    (the head noun phrase, not an apposition), the last tier keyword decides: "Pharmacy refill
    records" is a record, "Tomás's sister Inés, a pharmacist" is family.
    """
    found = find_source(text, subject)
    m = _REPORT_VERB.search(text)
    phrase = " ".join((text[: m.start()] if m else text).split()[: 8 if m else 6])
    head = phrase.split(",")[0]
    hits = []
    for tier, rx in enumerate(_TIER_RX):
        for hit in rx.finditer(head):
            hits.append((hit.start(), tier))
    if hits:
        return max(hits)[1], phrase
    if found and found != "self-report" and found[:1].isupper() and " " not in found.strip():
        return 2, found  # find_source named a person other than the user
    return 3, "self-report"


class SourcePriorityPolicy(Baseline):
    """Commit to the claim of the highest-priority source (the SCC baseline).

    Fixed priority: official record/log > professional (doctor, teacher, school, bank, ...) >
    family or third party > the user's own report. Within a tier the most relevant memory wins.
    """

    name = "source_priority"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Restate the top-priority source's memory (commit)."""
        ranked = self.relevant(memories, query)
        if not ranked:
            return self._nothing()
        subject = _subject_names([m.text for m in memories])
        tiers = [source_tier(m.text, subject) for m in ranked]
        best = min(range(len(ranked)), key=lambda i: (tiers[i][0], i))
        tier, phrase = tiers[best]
        return self.commit(
            ranked[best],
            lead=f"The most authoritative source I have ({_TIER_NAMES[tier]}) says:",
            label=_TIER_NAMES[tier],
            rationale=f"highest-priority source: {phrase or 'self-report'} "
            f"(tier {tier}: {_TIER_NAMES[tier]})",
        )


class AlwaysAskPolicy(Baseline):
    """Always ask the same generic question and answer nothing."""

    name = "always_ask"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Ask :data:`GENERIC_QUESTION` (clarify)."""
        decision = Decision(
            action=Action.CLARIFY,
            missing_information="more about the user's situation",
            rationale="always_ask: asks a generic question whatever the memories say",
            backbone="baseline",
        )
        return Response(text=GENERIC_QUESTION, decision=decision, questions=[GENERIC_QUESTION])


class AlwaysConditionalizePolicy(Baseline):
    """List every relevant memory as an if/then branch, without asking anything."""

    name = "always_conditionalize"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """One branch per relevant memory (conditionalize)."""
        ranked = self.relevant(memories, query)
        if not ranked:
            return self._nothing()
        lines = ["It depends on which of these applies to you now:"]
        branches: dict[str, str] = {}
        for i, m in enumerate(ranked):
            tail = "plan around that" if i == 0 else "plan around that instead"
            lines.append(f'- If "{m.text.strip()}" is what applies, {tail}.')
            branches[f"if: {m.text.strip()}"] = tail
        decision = Decision(
            action=Action.CONDITIONALIZE,
            evidence={f"branch_{i + 1}": [m.id] for i, m in enumerate(ranked)},
            rationale=f"always_conditionalize: one branch per relevant memory ({len(ranked)})",
            backbone="baseline",
        )
        return Response(
            text="\n".join(lines),
            decision=decision,
            cited_memory_ids=[m.id for m in ranked],
            branches=branches,
        )


_ANTONYMS = (
    ("always", "never"),
    ("more", "less"),
    ("more", "fewer"),
    ("start|starts|started|starting|began|begin", "stop|stops|stopped|stopping|quit"),
    ("increase|increases|increased", "decrease|decreases|decreased|reduce|reduced"),
    ("yes", "no"),
    (
        "allowed|allows|permitted|approved|enabled|added",
        "forbidden|banned|revoked|disabled|denied|removed",
    ),
    ("likes?|loves?|enjoys?", "dislikes?|hates?"),
    ("high|higher", "low|lower"),
    ("early|earlier", "late|later"),
    ("morning|mornings", "evening|evenings|night|nights"),
    ("big|large|larger", "small|smaller"),
    ("hot|warm", "cold|cool"),
    ("on", "off"),
    ("up", "down"),
)
_ANTONYM_RX = [
    (re.compile(rf"\b(?:{a})\b", re.IGNORECASE), re.compile(rf"\b(?:{b})\b", re.IGNORECASE))
    for a, b in _ANTONYMS
]


def opposition_cue(a: str, b: str) -> str | None:
    """A surface opposition between two texts, in words, or ``None``.

    Fires on negation in one text but not the other, or an antonym pair split across them
    (always/never, more/less, start/stop, ...).
    """
    na, nb = _NEGATION.search(a), _NEGATION.search(b)
    if bool(na) != bool(nb):
        cue = na or nb
        assert cue is not None
        return f"negation {cue.group(0)!r} in one memory only"
    for ra, rb in _ANTONYM_RX:
        ma, mb = ra.search(a), rb.search(b)
        if ma and mb and not rb.search(a) and not ra.search(b):
            return f"{ma.group(0)!r} vs {mb.group(0)!r}"
        ma, mb = ra.search(b), rb.search(a)
        if ma and mb and not rb.search(b) and not ra.search(a):
            return f"{mb.group(0)!r} vs {ma.group(0)!r}"
    return None


class LexicalConflictPolicy(Baseline):
    """A surface-opposition detector: clarify on an opposition cue, else answer like ``direct``.

    Two relevant memories oppose when they share a content word the query does not, and
    :func:`opposition_cue` fires. On a detection the policy names the pair and asks
    :data:`GENERIC_QUESTION`.
    """

    name = "lexical"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Clarify on a detected opposition; otherwise restate the top memory (commit)."""
        ranked = self.relevant(memories, query)
        if not ranked:
            return self._nothing()
        drop = {n.lower() for n in _subject_names([m.text for m in memories])} | _stems(query)
        stems = [_stems(m.text, drop) for m in ranked]
        for i in range(len(ranked)):
            for j in range(i + 1, len(ranked)):
                if not stems[i] & stems[j]:
                    continue
                cue = opposition_cue(ranked[i].text, ranked[j].text)
                if cue is None:
                    continue
                a, b = ranked[i], ranked[j]
                text = (
                    f'Some of what I remember seems to point different ways: "{a.text.strip()}" '
                    f'versus "{b.text.strip()}". {GENERIC_QUESTION}'
                )
                decision = Decision(
                    action=Action.CLARIFY,
                    evidence={"side_a": [a.id], "side_b": [b.id]},
                    rationale=f"lexical: opposition cue ({cue})",
                    backbone="baseline",
                )
                return Response(
                    text=text,
                    decision=decision,
                    cited_memory_ids=[a.id, b.id],
                    questions=[GENERIC_QUESTION],
                )
        return self.commit(
            ranked[0],
            lead="Going by what you've told me:",
            label="answer",
            rationale="no opposition cue among the relevant memories; restates the top one",
        )


# -- registry factories ----------------------------------------------------------------------


@policy("direct")
def direct(**args: Any) -> DirectPolicy:
    """Build the ``direct`` baseline (args: ``relevance``, ``top_k``, ``embedding_model``)."""
    return DirectPolicy(**args)


@policy("recency")
def recency(**args: Any) -> RecencyPolicy:
    """Build the ``recency`` baseline."""
    return RecencyPolicy(**args)


@policy("majority")
def majority(**args: Any) -> MajorityPolicy:
    """Build the ``majority`` baseline."""
    return MajorityPolicy(**args)


@policy("source_priority")
def source_priority(**args: Any) -> SourcePriorityPolicy:
    """Build the ``source_priority`` baseline."""
    return SourcePriorityPolicy(**args)


@policy("always_ask")
def always_ask(**args: Any) -> AlwaysAskPolicy:
    """Build the ``always_ask`` baseline."""
    return AlwaysAskPolicy(**args)


@policy("always_conditionalize")
def always_conditionalize(**args: Any) -> AlwaysConditionalizePolicy:
    """Build the ``always_conditionalize`` baseline."""
    return AlwaysConditionalizePolicy(**args)


@policy("lexical")
def lexical(**args: Any) -> LexicalConflictPolicy:
    """Build the ``lexical`` conflict-detector baseline."""
    return LexicalConflictPolicy(**args)
