"""The post-decision guard: one invariant every backbone's decision passes through.

Whatever chose the action (the offline rules, a language model, a future learned policy), the
decision is checked against the evidence the offline analysis found before anything is written:

* **Risk never goes down.** The decision's risk is the higher of the analysis's risk (the
  offline reading, or whatever risk tier a relation layer puts on the :class:`Analysis`) and
  what the backbone said. A model replying ``"risk": "low"`` cannot lower it.
* **No commit on a high-risk matter without positive evidence.** On a high-risk query a
  ``commit`` stands only when the claim it commits to is stated by the user or by an
  authoritative record (another source's account of it stands beside such a claim only when
  the relation layer positively reads the two as agreeing, :attr:`Analysis.agreement`; where
  the layer reads such agreement, two first-hand claims must read as agreeing too; and no
  reading of agreement stands between two claims whose figures differ, each stating numbers,
  amounts or times and none in common), and nothing in the recalled cluster disputes it or
  could supersede it:
  an active contradiction / oscillation / context edge touching it, a supersedes or
  invalidation edge pointing at it, or a conflict cluster no later confirmation settled, all
  void it. "No conflict was detected" is not evidence. Otherwise the commit becomes ``verify``
  and the reason is written into the decision (``rationale``, prefixed with
  :data:`GUARD_TAG`).
* **Two readers for "nothing is in conflict".** Under ``rules`` the analysis carries a second
  reading of the memories on the query (:meth:`Analysis.second_reading`: the shipped fitted
  layer's situation model, over the memories at least 0.2 similar to the query that state
  something). Where the graph typed no conflict and nothing resolved one, a commit, at any
  stakes, stands only when that reading too finds the memories agreeing (``NONE`` at least
  one half); the cues miss conflicts phrased in words they do not list (a friend who "swears"
  the appointment is on another day, a record that changed with no date).
* **A model's reading is never the only evidence.** Under a layer that reads situations but
  is not the shipped fitted one, a second reading of the same memories is taken (``llm``: its
  fitted fallback's,
  :meth:`~caap.conflict_graph._relations_llm.LLMRelations.guard_situation`; ``learned``
  weights refitted on other data: the shipped layer's): on a high-risk query that reading too
  must find the memories agreeing, and at any stakes neither reading may find disagreeing
  sources more likely than not (below). A model that reads everything as agreeing, wrongly
  or steered by text in the memories, or a refit no guard stress measured, does not carry a
  commit alone.
* **No commit over sources that disagree, whatever the stakes read.** The risk reading misses
  stakes it never saw (a van's payload, a boat's passenger limit, an appointment date), and
  with it the rule above; so below high stakes a ``commit`` also becomes ``verify`` when the
  graph typed a source contradiction nothing settles (a later confirmation, the user's
  confirmed track record of the sources, or one written record against an informal account
  that the commit cites) or the layer (or its second reader) reads the memories as
  disagreeing sources more likely than not. The risk is not re-rated.

The guard is pure: it reads the analysis and the decision and returns a decision.
"""

from __future__ import annotations

import re

from caap.conflict_graph import _text
from caap.conflict_graph._values import values
from caap.models import (
    Action,
    ConflictEdge,
    ConflictType,
    Decision,
    EdgeKind,
    Memory,
    Response,
    RiskTier,
)
from caap.policy._analysis import (
    AGREEMENT_SHARE,
    Analysis,
    is_self_source,
    max_risk,
    second_person,
    short,
)

__all__ = ["GUARD_TAG", "apply_guard", "guarded", "max_risk", "realize_guarded"]

#: Prefix of the rationale sentence the guard adds when it changes a decision.
GUARD_TAG = "[guard]"
_OVERRIDE = "commit changed to verify"

#: Edges that say two memories disagree (either endpoint is disputed).
_DISPUTES = frozenset(
    {
        EdgeKind.SOURCE_CONTRADICTION,
        EdgeKind.TEMPORAL_OSCILLATION,
        EdgeKind.CONTEXT_PARTITION,
    }
)
#: Edges that replace or put in doubt their target (the older memory).
_REPLACES = frozenset({EdgeKind.SUPERSEDES, EdgeKind.PROPAGATED_INVALIDATION})

#: The share of a pair's agree-or-conflict reading that must be agreement for someone else's
#: account to stand beside a first-hand claim (:attr:`Analysis.agreement`); the analysis
#: reads several parties' accounts as one from the same share.
AGREEMENT_MIN = AGREEMENT_SHARE

#: The situation reading's probability that the recalled memories agree (``NONE``) below which
#: a high-stakes commit has no positive evidence.
SITUATION_MIN = 0.5


def guarded(decision: Decision) -> bool:
    """True when the guard overrode ``decision``'s action."""
    return f"{GUARD_TAG} " in decision.rationale and _OVERRIDE in decision.rationale


def _first_hand(memory: Memory, attributed: float | None) -> bool:
    """Stated by the user themselves or by a written record.

    A memory with no source named is first-hand only when the relation layer read it as the
    user's own account (``attributed``, its confidence that someone else is speaking, below
    one half); with no reading at all it is not known to be, which is not evidence.
    """
    src = memory.source
    if src is None or not src.strip():
        return attributed is not None and attributed < 0.5
    return is_self_source(src) or _text.is_record_source(src)


#: How many of the memories nearest the query a high-stakes commit is held to, whatever the
#: decision cites.
NEAREST_CLAIMS = 3


def _claims(decision: Decision, analysis: Analysis) -> list[str]:
    """Ids of the memories the commit rests on (the resolution alone when one settles it): the
    ones the decision cites and the :data:`NEAREST_CLAIMS` most relevant, since an answer
    that cites only some of them is still read against the rest. (Holding only the cited ones
    let an offline answer that quoted a corroborating group commit on a high-stakes source
    conflict of the blind test split.)"""
    known = analysis.memories
    if "resolution" in decision.evidence:
        return [i for i in decision.evidence["resolution"] if i in known]
    cited = [i for ids in decision.evidence.values() for i in ids if i in known]
    nearest = [i for i in analysis.relevant[:NEAREST_CLAIMS] if i in known]
    return list(dict.fromkeys(cited + nearest))


def _voiding_edge(claim: str, analysis: Analysis) -> ConflictEdge | None:
    """An active edge of the recalled cluster that disputes ``claim`` or replaces it.

    Edges from a resolution to memories recorded before it are what it settles, not disputes.
    """
    cluster = analysis.cluster
    if cluster is None:
        return None
    res = analysis.resolution
    for e in cluster.edges:
        if not e.active or claim not in (e.source_id, e.target_id):
            continue
        if e.kind in _REPLACES and e.target_id != claim:
            continue  # the claim is the newer state
        if e.kind not in _DISPUTES and e.kind not in _REPLACES:
            continue
        if res is not None and claim == res.id:
            other = analysis.memories.get(e.target_id if e.source_id == claim else e.source_id)
            if other is not None and other.created_at <= res.created_at:
                continue
        return e
    return None


def _why_not(decision: Decision, analysis: Analysis) -> str | None:
    """Why a high-risk commit lacks positive evidence, or ``None`` when it has it."""
    cluster = analysis.cluster
    if cluster is not None and cluster.has_conflict and analysis.resolution is None:
        return (
            f"the recalled memories carry an unresolved {cluster.conflict_type.value} conflict"
            + (f" ({cluster.unresolved})" if cluster.unresolved else "")
        )
    situation = analysis.situation
    # The model's own reading, before any calibration shift: see SituationVerdict.unshifted.
    agreeing = situation.evidence_probs.get("NONE", 0.0) if situation is not None else 1.0
    if agreeing < SITUATION_MIN:
        return (
            "the relation layer does not read the recalled memories as agreeing "
            f"(agreement {agreeing:.2f})"
        )
    second = _second_opinion(analysis)
    if second is not None:
        return second
    claims = _claims(decision, analysis)
    if not claims:
        return "the decision cites no recalled memory to commit to"
    for claim in claims:
        edge = _voiding_edge(claim, analysis)
        if edge is not None:
            return f"a {edge.kind.value} edge in the recalled cluster bears on memory {claim}"
    first = [i for i in claims if _first_hand(analysis.memories[i], analysis.attributed.get(i))]
    # Someone else's account counts when the layer reads it as stating the same thing as a
    # first-hand claim (agreement, not a conflict of any kind); never on its own.
    second_hand = [
        i
        for i in claims
        if i not in first
        and not any(
            analysis.agreement.get(frozenset((i, j)), 0.0) >= AGREEMENT_MIN
            and _same_figures(analysis, i, j)
            for j in first
        )
    ]
    if second_hand:
        sources = sorted({analysis.memories[i].source or "" for i in second_hand} - {""})
        return (
            f"memory {second_hand[0]} is "
            + (f"{', '.join(sources)}'s account" if sources else "not known to be first-hand")
            + ", neither the user's own nor an authoritative record"
        )
    return _first_hand_dispute(first, analysis)


#: The layer's probability that two first-hand claims are about different things above which
#: they need not read as agreeing (a user's aside beside their dose). Of the 511 labelled
#: source contradictions the pair model never trained on (``blind/pairs_values`` and the blind
#: dev split's pairs), the `learned` layer reads 1 as unrelated at 0.8 or more (29 at 0.5).
UNRELATED_MIN = 0.8


def _first_hand_dispute(first: list[str], analysis: Analysis) -> str | None:
    """Why two first-hand claims do not stand together, or ``None`` when they do.

    A record and the user's own account, or two records, can disagree (a dose on a label and
    the dose the user says they take), and a graph that typed no edge between them is no
    evidence that they agree. Where the relation layer reads pairs (a layer that reads whole
    situations: :attr:`Analysis.situation` is set, and :attr:`Analysis.agreement` holds its
    readings), every two first-hand claims must read as agreeing, unless the layer reads them
    as surely about different things (:data:`UNRELATED_MIN`); a pair it did not read does not
    stand. A layer without such readings (``rules``) is held to the edges alone.
    """
    if analysis.situation is None:
        return None
    for k, a in enumerate(first):
        for b in first[k + 1 :]:
            pair = frozenset((a, b))
            share = analysis.agreement.get(pair)
            if share is not None and analysis.unrelated.get(pair, 0.0) >= UNRELATED_MIN:
                continue
            if share is None or share < AGREEMENT_MIN:
                read = "not read" if share is None else f"agreement {share:.2f}"
                return (
                    f"memories {a} and {b}, both first-hand, are not read as stating the same "
                    f"thing ({read})"
                )
            if not _same_figures(analysis, a, b):
                va, vb = _figures(analysis, a), _figures(analysis, b)
                return (
                    f"memories {a} and {b}, both first-hand, state different figures "
                    f"({', '.join(sorted(va))} against {', '.join(sorted(vb))})"
                )
    return None


def _figures(analysis: Analysis, memory_id: str) -> frozenset[str]:
    """The numbers, amounts and clock times a memory states, in one canonical form."""
    return values(analysis.memories[memory_id].text)


#: A four-digit year, as the value reader writes one.
_YEAR = re.compile(r"(?:19|20)\d\d")


def _same_figures(analysis: Analysis, a: str, b: str) -> bool:
    """Whether two claims can state the same thing by their figures: one states none, or
    they share one. A reading of agreement is not evidence against the figures themselves
    (12 units on a doctor's sheet, 14 on the pharmacy label), whatever layer or model read it.
    A shared year is not a shared figure when both state more than years: two deadlines in
    one year ("30 November 2026", "31 December 2026") differ by their day."""
    fa, fb = _figures(analysis, a), _figures(analysis, b)
    na = frozenset(v for v in fa if not _YEAR.fullmatch(v))
    nb = frozenset(v for v in fb if not _YEAR.fullmatch(v))
    if na and nb:
        return bool(na & nb)
    return not fa or not fb or bool(fa & fb)


#: The situation reading's probability of a source contradiction from which a commit is held
#: at any stakes (more likely than not).
SOURCES_DISAGREE = 0.5


def _unsettled_sources(decision: Decision, analysis: Analysis) -> str | None:
    """Why the memories read as an unsettled source contradiction, or ``None``.

    Whatever the stakes read, a commit over sources that disagree has nothing to rest on: the
    risk reading misses stakes it was not trained on (a van's payload, a boat's passenger
    limit, an appointment date), and with it the high-stakes rule. So the guard also holds a
    commit when the graph typed a source contradiction that nothing settles, or when the
    layer's reading of the memories as a whole finds a source contradiction more likely than
    not (:data:`SOURCES_DISAGREE`). What settles a typed one below high stakes is what the
    offline policy commits on: a later confirmation, the user's confirmed track record of those
    sources favouring a side, or a single written record against an informal account, when
    the commit cites the record. At low stakes a track record also stands against the layer's
    reading: it is the user's own evidence about these very sources, which no reading of the
    texts can see; a record against hearsay is a standing preference, which that reading may
    doubt.
    """
    cluster = analysis.cluster
    if (
        cluster is not None
        and cluster.conflict_type is ConflictType.SCC
        and cluster.has_conflict
        and analysis.resolution is None
    ):
        by_track_record = analysis.favoured_by_track_record is not None
        if by_track_record and max_risk(analysis.risk, decision.risk) is RiskTier.LOW:
            # The user's confirmed outcomes for these very sources settle it at low stakes,
            # as the offline policy commits on them; a reading of the memories as a whole
            # sees the disagreement, not that record.
            return None
        record = analysis.lone_record_side
        cited = {i for ids in decision.evidence.values() for i in ids}
        by_record = record is not None and bool(cited & set(analysis.sides[record]))
        if not by_track_record and not by_record:
            return "the recalled memories carry a source contradiction"
    situation = analysis.situation
    if situation is not None and situation.probs.get("SCC", 0.0) >= SOURCES_DISAGREE:
        return (
            "the relation layer reads the recalled memories as sources that disagree "
            f"(source contradiction {situation.probs['SCC']:.2f})"
        )
    # The second reader of a layer that reads situations (``llm``'s fitted fallback, the
    # shipped layer beside a refit) too.
    second = analysis.second_reading() if situation is not None else None
    if second is not None and second.probs.get("SCC", 0.0) >= SOURCES_DISAGREE:
        return (
            "the guard's second reader reads the recalled memories as sources that disagree "
            f"(source contradiction {second.probs['SCC']:.2f})"
        )
    return None


def _second_opinion(analysis: Analysis) -> str | None:
    """Why the guard's second reader (:meth:`Analysis.second_reading`: under ``rules``, the
    shipped fitted layer; under ``llm``, its fitted fallback; beside a refit, the shipped
    layer) does not read the recalled memories as agreeing, or ``None`` when it does or there
    is none. Two readers must find nothing in conflict before a commit stands: the cues miss
    conflicts phrased in words they do not list, the model misses others, and a language
    model's reading can be wrong or steered by the memories' text."""
    cluster = analysis.cluster
    typed = (cluster is not None and cluster.has_conflict) or analysis.resolution is not None
    if typed and analysis.situation is None:
        # Under ``rules``, a conflict the graph typed is read, and what settles it decided,
        # by the rules above (a record against hearsay, a later state, a confirmation); the
        # second reader checks only a reading that nothing is in conflict. A layer that reads
        # situations is held to its second reader wherever it is held to its own reading.
        return None
    second = analysis.second_reading()
    if second is None:
        return None
    agreeing = second.evidence_probs.get("NONE", 0.0)
    if agreeing >= SITUATION_MIN:
        return None
    best = max(second.evidence_probs, key=lambda k: second.evidence_probs[k])
    return (
        "the fitted reader does not read the recalled memories as agreeing "
        f"(agreement {agreeing:.2f}, {best} {second.evidence_probs[best]:.2f})"
    )


def apply_guard(decision: Decision, analysis: Analysis) -> Decision:
    """Enforce the risk floor and the high-risk commit rule on any backbone's decision.

    Args:
        decision: What a backbone decided (offline or model).
        analysis: The offline analysis of the same memories and query.

    Returns:
        ``decision`` unchanged when it already holds, else a copy with the risk raised to the
        analysis's and/or ``commit`` replaced by ``verify``, the reason appended to
        ``rationale``.
    """
    risk = max_risk(analysis.risk, decision.risk)
    update: dict[str, object] = {}
    notes: list[str] = []
    if risk is not decision.risk:
        update["risk"] = risk
        notes.append(
            f"risk raised from {decision.risk.value} to {risk.value}: a backbone cannot lower "
            "the risk the analysis found"
        )
    held_to = max_risk(risk, analysis.guard_risk or risk)
    if held_to is RiskTier.HIGH and decision.action is Action.COMMIT:
        reason = _why_not(decision, analysis)
        if reason is not None:
            if risk is not RiskTier.HIGH:
                update["risk"] = RiskTier.HIGH
                notes.append("the risk model reads this as high stakes")
            update["action"] = Action.VERIFY
            if not decision.missing_information:
                update["missing_information"] = (
                    "confirmation from the user or the governing record that this is current"
                )
            notes.append(f"{_OVERRIDE}: high-stakes matter and no positive evidence ({reason})")
    elif decision.action is Action.COMMIT:
        reason = _unsettled_sources(decision, analysis)
        if reason is not None:
            update["action"] = Action.VERIFY
            if not decision.missing_information:
                update["missing_information"] = "which source is right"
            notes.append(f"{_OVERRIDE}: {reason}, and nothing settles which is right")
        elif analysis.situation is None and (second := _second_opinion(analysis)) is not None:
            # Below high stakes only ``rules`` is held to its second reader's agreement: a
            # layer that reads situations is held there to its own reading of disagreeing
            # sources, and its second reader's (above), not to a reading of agreement.
            update["action"] = Action.VERIFY
            if not decision.missing_information:
                update["missing_information"] = "whether these memories still agree"
            notes.append(f"{_OVERRIDE}: {second}")
    if not notes:
        return decision
    sep = " " if decision.rationale else ""
    update["rationale"] = f"{decision.rationale}{sep}{GUARD_TAG} " + "; ".join(notes) + "."
    return decision.model_copy(update=update)


def realize_guarded(analysis: Analysis, decision: Decision) -> Response:
    """The answer for a commit the guard turned into ``verify`` where no conflict was typed:
    say what the memories hold and from whom, and what to confirm before acting."""
    a = analysis
    claims = _claims(decision, a) or a.relevant[:3]
    claims = [i for i in claims if a.stated(i)]  # not a stored request
    if decision.risk is RiskTier.HIGH:
        lines = ["This is a high-stakes matter, so I'd confirm it before acting on it."]
    else:
        lines = ["Your memories on this may not agree, so I'd confirm it before acting on it."]
    if claims:
        said = []
        for i in claims[:3]:
            m = a.memories[i]
            who = f" ({m.source})" if m.source else ""
            said.append(second_person(short(a.stated(i), 30), a.subject) + who)
        lines.append("What your memories say: " + "; ".join(said) + ".")
    lines.append(
        "That is not yet confirmed by you or by the governing record, so I wouldn't treat it "
        "as settled."
    )
    question = "Can you confirm it is current, with the record or the person responsible?"
    lines.append(question)
    lines.append(
        "If it is confirmed, we go ahead on it; if not, we hold off until whoever decides "
        "this has been asked."
    )
    return Response(
        text="\n".join(lines),
        decision=decision,
        cited_memory_ids=[i for i in claims if i in a.memories],
        questions=[question],
    )
