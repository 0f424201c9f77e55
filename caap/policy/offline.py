"""The offline, deterministic backbone: decisions from the conflict graph, composed responses.

``decide`` picks the least cautious action the visible evidence justifies and grows more
cautious with the cost of being wrong. ``realize`` names the conflict in the memories' own
words, gives branches, asks what would settle it and says how each answer changes the advice.
It states no user fact that is not in a memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

import networkx as nx

from caap.conflict_graph import _text
from caap.models import Action, ConflictType, Decision, EdgeKind, Response, RiskTier
from caap.policy._analysis import Analysis, is_self_source, memory_time, second_person, short
from caap.policy._speech import stated_part
from caap.policy._uncertainty import choose_under_uncertainty

__all__ = ["decide_offline", "realize_offline"]

_ACTION_REQUEST = re.compile(
    r"^\s*(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:tell|let|text|email|send|book|"
    r"sign|order|give|authori[sz]e|approve|confirm|submit|schedule|pay|transfer|call|"
    r"message|reply|forward|cancel|renew|file|share|grant|add|remove)\b|"
    r"^\s*(?:please\s+)?(?:tell|let|text|email|send|book|sign|order|give|authori[sz]e|approve|"
    r"confirm|submit|schedule|pay|transfer|message|forward|cancel|renew|file|share|grant)\b",
    re.I,
)


#: Below this query similarity no memory is taken to bear on the query. Chosen on the blind
#: train split: the nearest memory of an instance's own conflict lies below 0.3 in 23 of 240
#: instances (a question worded far from what was said) and below 0.2 in 4; memories of
#: nothing like the query sit near 0.
_MIN_SUPPORT = 0.2


def _answer(a: Analysis, n: int = 3) -> list[str]:
    """The memories a plain answer rests on: of the recalled cluster's memories that the
    layer read as corroborating each other, the largest such group (the most relevant first;
    ties to the group holding the more relevant memory), so that a loosely related memory
    that happens to sit nearest the query is not quoted, nor held by the guard, as the answer.
    The ``n`` most relevant memories when nothing corroborates anything."""
    c = a.cluster
    if c is None:
        return a.relevant[:n]
    rank = {i: k for k, i in enumerate(a.relevant)}
    agree = nx.Graph()
    agree.add_edges_from(
        (e.source_id, e.target_id)
        for e in c.edges
        if e.active
        and e.kind is EdgeKind.CORROBORATES
        and e.source_id in rank
        and e.target_id in rank
    )
    if not agree:
        return a.relevant[:n]
    groups = [sorted(g, key=rank.__getitem__) for g in nx.connected_components(agree)]
    best = max(groups, key=lambda g: (len(g), -rank[g[0]]))
    return best[:n]


def _is_record(source: str) -> bool:
    return _text.is_record_source(source)


def _by_track_record(a: Analysis, make: Callable[..., Decision], missing: str) -> Decision | None:
    """Below high stakes, once the user has confirmed outcomes for these sources: commit on
    the favoured claim when the posterior margin clears the threshold and the stakes are low,
    else verify. ``None`` (the other rules apply) when no source here has a track record."""
    v = a.source_view
    if v is None or not v.informed:
        return None
    p = v.posterior
    favoured = a.favoured_by_track_record
    if favoured is not None and a.risk is RiskTier.LOW:
        return make(
            Action.COMMIT,
            f"low stakes, and the sources' confirmed track record ({v.describe()}) favours "
            f"{favoured} (posterior margin {p.margin:.2f} >= {p.threshold:.2f})",
        )
    why = (
        f"margin {p.margin:.2f} < {p.threshold:.2f}"
        if p.abstain
        else "the stakes are not low enough to act on a track record alone"
    )
    return make(
        Action.VERIFY,
        f"sources disagree and their confirmed track record ({v.describe()}) does not settle "
        f"it ({why}); check before relying on either",
        missing,
    )


def decide_offline(a: Analysis) -> Decision:
    """Choose an action from the analysis (see module doc).

    A plain commit (no conflict) needs a relevant memory that states something: a stored
    question or request ("Is it true that I'm allergic to peanuts?") bears on the query
    without answering it, so with nothing else the action is ``clarify``.
    """
    d = _decide_offline(a)
    if (
        d.action is Action.COMMIT
        and d.conflict_type is ConflictType.NONE
        and a.resolution is None
        and not any(stated_part(a.text(i)) for i in a.relevant)
    ):
        return d.model_copy(
            update={
                "action": Action.CLARIFY,
                "missing_information": "what the user's situation or preference is on this",
                "rationale": "no relevant memory states anything: the nearest ones only ask",
            }
        )
    return d


def _decide_offline(a: Analysis) -> Decision:
    """The action before the stated-memory check of :func:`decide_offline`.

    The graph's reading gives a first choice. When the relation layer also read the situation
    as a whole (:attr:`Analysis.situation`), the action is the one that fits best in
    expectation over how likely each reading is (:func:`choose_under_uncertainty`), with the
    graph's choice as a small prior; a commit the graph justified by a later confirmation, by
    the query naming the context or by the user's track record of the sources stands, and so
    does the stale-state logic. Its weakest reading, a change elsewhere that may stop a habit,
    is weighed against the situation reading unless that too reads a stale state. The reading
    never turns an unresolved source contradiction the graph typed into a commit.
    """
    d = _decide_graph(a)
    s = a.situation
    # A change elsewhere that may stop a habit is the graph's weakest stale reading (an
    # inferred dependency, extent unknown): the situation reading weighs in on it. A direct
    # supersession, or a change that states the habit is off, stands.
    weak_stale = a.stale is not None and a.stale.propagated and not a.stale.certain
    stale = a.conflict_type is ConflictType.STALE and not weak_stale
    if s is None or stale or a.resolution is not None:
        return d
    if d.action is Action.COMMIT and a.settled_side is not None:
        return d
    if (
        d.action is Action.COMMIT
        and d.conflict_type is ConflictType.SCC
        and a.favoured_by_track_record is not None
    ):
        # The user's confirmed outcomes for these very sources settled which to go with: the
        # situation reading sees the disagreement, not that record, so it does not reopen it.
        return d
    if d.action is Action.CLARIFY and a.conflict_type is ConflictType.NONE:
        return d  # nothing on record bears on the query: asking is the answer
    if weak_stale and max(s.probs, key=lambda k: s.probs[k]) == "STALE":
        # The reading agrees that a state went stale; it does not tell a stated replacement
        # (act on the new state) from a dependency the layer inferred, so the graph's check
        # stands rather than a commit on a replacement the change never stated.
        return d
    high = a.risk is RiskTier.HIGH
    action = choose_under_uncertainty(s.probs, high_risk=high, graph_action=d.action)
    if action is Action.COMMIT and d.conflict_type is ConflictType.SCC:
        # A source contradiction the graph typed and nothing settled is not dismissed by a
        # reading of the memories as a whole: the risk reading can miss high stakes, and a
        # commit over disagreeing sources is then an unsafe answer.
        return d
    top = max(s.probs, key=lambda k: s.probs[k])
    newest = top == "STALE" and action in (Action.COMMIT, Action.VERIFY)
    rules_out = newest and action is Action.COMMIT and a.successor_rules_out
    if rules_out:
        # The layer reads the later memory as ruling the earlier state out, not as a new
        # value of it: a dependency it inferred, whose extent nothing states. As with the
        # graph's own propagated reading, that is checked, not committed on.
        action = Action.VERIFY
    if action is d.action and not (newest and d.conflict_type is ConflictType.NONE):
        return d
    conflicting = {k: v for k, v in s.probs.items() if k not in ("NONE", "STALE")}
    leading = max(conflicting, key=lambda k: conflicting[k]) if conflicting else "NONE"
    ctype = d.conflict_type
    if newest:
        # A later state seems to replace an earlier one the graph did not link: act on the
        # newest relevant memory and say what it replaces.
        ctype = ConflictType.STALE
    elif action is Action.COMMIT:
        ctype = ConflictType.NONE
    elif ctype in (ConflictType.NONE, ConflictType.STALE):
        ctype = ConflictType(leading)
    reading = ", ".join(f"{k} {v:.2f}" for k, v in sorted(s.probs.items(), key=lambda kv: -kv[1]))
    evidence = d.evidence if d.evidence else {"answer": _answer(a)}
    missing = None if action is Action.COMMIT else _MISSING["STALE" if newest else leading]
    if rules_out:
        missing = "whether that change still rules this out, and for how long"
    return d.model_copy(
        update={
            "action": action,
            "conflict_type": ctype,
            "evidence": evidence,
            "missing_information": d.missing_information or missing,
            "rationale": f"{action.value} fits the likely readings best (situation reading: "
            f"{reading}; the graph alone chose {d.action.value}: {d.rationale})"
            + (
                "; the layer reads the later memory as ruling the earlier state out, not as a "
                "new value of it, so that is checked first"
                if rules_out
                else ""
            ),
        }
    )


_MISSING = {
    "NONE": "which of these applies now",
    "CPC": "which situation this is for",
    "BOC": "which way it is going at the moment",
    "SCC": "which account is current and authoritative",
    "STALE": "whether the most recent information is still current",
}


def _decide_graph(a: Analysis) -> Decision:
    """The action the graph's cluster reading alone calls for."""
    ctype = a.conflict_type
    sides = a.sides
    evidence = {label: ids for label, ids in sides.items()} or {"answer": _answer(a)}
    unresolved = a.cluster.unresolved if a.cluster else None
    risk = a.risk

    def make(action: Action, rationale: str, missing: str | None = None) -> Decision:
        return Decision(
            action=action,
            conflict_type=ctype,
            unresolved=unresolved,
            missing_information=missing,
            evidence=evidence,
            risk=risk,
            rationale=rationale,
        )

    if a.resolution is not None and ctype is not ConflictType.NONE:
        evidence = {"resolution": [a.resolution.id], **evidence}
        return make(
            Action.COMMIT,
            f"a later confirmation ({a.resolution.source or 'the user'}) settles the conflict",
        )
    if ctype is ConflictType.NONE:
        support = max((a.relevance.get(i, 0.0) for i in a.relevant), default=0.0)
        if support < _MIN_SUPPORT:
            # Committing on memories that do not bear on the query would be confidence the
            # evidence does not give: ask instead.
            return make(
                Action.CLARIFY,
                "no stored memory bears on the query closely enough to answer from",
                "what the user's situation or preference is on this",
            )
        return make(Action.COMMIT, "the relevant memories agree; nothing is unresolved")
    if ctype is ConflictType.STALE and a.stale is not None and a.stale.propagated:
        return _decide_propagated(a, make)
    if ctype is ConflictType.STALE and risk is RiskTier.HIGH:
        return make(
            Action.VERIFY,
            "a later report replaces an earlier one, but on a high-stakes matter the current "
            "state is confirmed before anyone acts on it",
            "whether the most recent information is confirmed and current",
        )
    if ctype is ConflictType.STALE:
        return make(
            Action.COMMIT,
            "a later observation replaces an earlier one; act on the current state and correct "
            "any premise built on the old one",
        )
    if ctype is ConflictType.CPC:
        if a.settled_side is not None and risk is not RiskTier.HIGH:
            return make(
                Action.COMMIT,
                f"the query names the context ({a.settled_side}), which settles the preference",
            )
        labels = [s for s in sides if s != "no condition stated"]
        missing = (
            "which situation applies: " + " or ".join(labels)
            if labels
            else "which situation applies (no memory states the condition it holds under)"
        )
        if risk is RiskTier.HIGH or len(sides) > 4:
            return make(
                Action.CLARIFY,
                "the preference depends on a context the query does not give, and a wrong "
                "guess is costly or the contexts are many",
                missing,
            )
        return make(
            Action.CONDITIONALIZE,
            "the preference depends on a context the query does not give; each context has "
            "a clear answer, so answer per context and ask which one applies",
            missing,
        )
    if ctype is ConflictType.BOC:
        missing = "which phase is current now and what triggers a switch"
        if risk is RiskTier.HIGH:
            return make(
                Action.CLARIFY,
                "the behaviour keeps switching and acting on the wrong phase is costly",
                missing,
            )
        if risk is RiskTier.MEDIUM:
            return make(
                Action.CONDITIONALIZE,
                "the behaviour keeps switching; the newest phase need not persist, so answer "
                "per phase",
                missing,
            )
        return make(
            Action.REVERSIBLE_TRIAL,
            "the behaviour keeps switching and the newest phase need not persist; a small "
            "step that is easy to undo is cheap to try while the trigger is unknown",
            missing,
        )
    # SCC: which source governs is itself uncertain.
    missing = (
        "which source is current and authoritative: " + " vs ".join(sides)
        if len(sides) >= 2
        else _MISSING["SCC"]  # one named side against accounts no source was read for
    )
    if risk is RiskTier.HIGH:
        if _ACTION_REQUEST.search(a.query):
            return make(
                Action.DEFER,
                "the query asks for a consequential action while sources disagree on a "
                "high-stakes matter; hold it until the governing source is confirmed",
                missing,
            )
        return make(
            Action.VERIFY,
            "sources disagree on a high-stakes matter; no consequential step before the "
            "governing source is verified",
            missing,
        )
    by_track_record = _by_track_record(a, make, missing)
    if by_track_record is not None:
        return by_track_record
    record = a.lone_record_side
    if risk is RiskTier.LOW and record is not None:
        return make(
            Action.COMMIT,
            f"low stakes and one side is a record ({record}) against an informal account",
        )
    return make(
        Action.VERIFY,
        "sources disagree and none is clearly more reliable; check before relying on either",
        missing,
    )


def _decide_propagated(a: Analysis, make: Callable[..., Decision]) -> Decision:
    """A change elsewhere (an injury, a move) puts a habit in doubt: say so, plan for the
    current state, and unless the change states that the habit is off, check before going
    back to it (``verify``) rather than offering the old habit as an equal branch."""
    s = a.stale
    assert s is not None
    # Name every change that reaches the habit (an injury and a move may both).
    change = (
        "' or '".join(short(a.text(i), 14) for i in s.changes[:2])
        if s.changes
        else "a later change"
    )
    habit = short(a.text(s.invalidated[0]), 14)
    premise = " The query presupposes the earlier habit." if s.premise else ""
    if s.certain:
        return make(
            Action.COMMIT,
            "a later change states that the earlier habit is off for now; act on the current "
            "state." + premise,
        )
    missing = f"whether '{change}' still affects '{habit}', and for how long"
    # Stale state is acted on as it stands now: the habit is put on hold, not offered as one
    # of two equal branches, and what would bring it back is checked first.
    return make(
        Action.VERIFY,
        "a later change likely stops an earlier habit, but how serious or lasting it is is not "
        "known; plan for the current state and check before going back to the habit." + premise,
        missing,
    )


# -- realization ---------------------------------------------------------------------------


def _you(a: Analysis, text: str) -> str:
    return second_person(text, a.subject)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def _month(d: datetime | None) -> str:
    return d.strftime("%B %Y") if d else "an undated point"


_OBJECT_HER = re.compile(
    r"\bher\b(?=\s*(?:[.,;:!?]|$|\s(?:and|or|but|to|for|with|at|in|on|from|by|as|when|if)\b))"
)
_PRONOUN = re.compile(r"\b(?:he|she|him|his|her|hers|himself|herself)\b", re.I)


def _names_someone_else(a: Analysis, text: str) -> bool:
    """Whether ``text`` names a person other than the user (a capitalised name mid-sentence,
    or a possessive one anywhere: "Maya's clinic record")."""
    subject = {n.lower() for n in a.subject}
    for n, m in enumerate(re.finditer(r"\b([A-Z][a-z]+)(['’]s)?\b", text)):
        name, possessive = m.group(1), m.group(2)
        if name.lower() in subject or _text.is_calendar_word(name):
            continue
        if possessive or (n > 0 and m.start() > 0 and text[m.start() - 2] not in ".!?"):
            return True
    return False


def _said(a: Analysis, memory_id: str, words: int) -> str:
    """What a memory states, cut to ``words``, addressed to the user ("you", not their name).

    A turn that only asks the assistant something is quoted as it is, never restated as a
    fact; a turn that states and asks keeps only what it states. He/she/his/her become
    "you"/"your" only in a memory about the user alone, told in the third person: in "Maya's
    record lists it as contraindicated for her", "her" is Maya; in "My mum asked me to call
    her", told in the user's own words, "her" is the mother.
    """
    text = a.text(memory_id)
    clip = short(a.stated(memory_id) or text, words)
    names_user = any(re.search(rf"\b{re.escape(n)}\b", text) for n in a.subject)
    if names_user and not _text.in_own_words(text) and not _names_someone_else(a, text):
        # "her" as an object ("contraindicated for her.") is "you", not "your".
        clip = _OBJECT_HER.sub("you", clip)
        return _you(a, clip)
    # Keep third-person pronouns as they are: rewrite only the user's name and first person.
    kept: list[str] = []

    def hide(m: re.Match[str]) -> str:
        kept.append(m.group(0))
        return f"\x00{len(kept) - 1}\x00"

    out = _you(a, _PRONOUN.sub(hide, clip))
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], out)


def _side_claim(a: Analysis, ids: list[str]) -> str:
    best = max(ids, key=lambda i: a.relevance.get(i, 0.0))
    return _said(a, best, 30)


def _cpc(a: Analysis, d: Decision, r: _Draft) -> None:
    sides = a.sides
    labelled = {k: v for k, v in sides.items() if k != "no condition stated"}
    conds = {label: _strip_lead(_you(a, label)) for label in labelled}
    if d.action is Action.COMMIT and a.settled_side:
        ids = sides.get(a.settled_side, [])
        r.say(
            f"Since {conds.get(a.settled_side, a.settled_side)}, I'd go with what you do in "
            f"that situation: {_side_claim(a, ids)}."
        )
        r.cite(ids)
        others = [k for k in labelled if k != a.settled_side]
        if others:
            r.say(
                "Your memories tie this to the situation, and the other situations on record "
                f"would call for something else ({_or([conds[k] for k in others[:2]])})."
            )
            r.cite([i for k in others for i in labelled[k]])
        return
    loose = sides.get("no condition stated", [])
    if not labelled:
        _cpc_unlabelled(a, d, r, loose)
        return
    n = len(labelled)
    r.say(
        "Your memories tie this to the situation rather than giving one answer; "
        + (f"{n} conditions are on record:" if n > 1 else "one condition is on record:")
    )
    for label, ids in labelled.items():
        r.branch(_cap(_if(label, conds[label])), _side_claim(a, ids))
        r.cite(ids)
    if loose:
        r.say(
            "Also on record, with no condition attached: "
            + "; ".join(_said(a, i, 25) for i in loose[:2])
            + "."
        )
        r.cite(loose[:2])
    r.say(
        "These don't contradict each other: each holds in its own situation, so what matters "
        "is which situation you are in this time."
    )
    # Every situation listed above is an option in the question.
    options = [conds[k] for k in labelled]
    if d.action is Action.CLARIFY:
        _why_ask(d, r)
    if len(options) == 1:
        r.ask(f"Is this for {options[0]}, or a different situation?")
    else:
        r.ask(f"Which situation is this for: {_or(options)}?")
    firsts = list(labelled.items())[:2]
    r.say(
        "Once I know, I'll tailor it: "
        + "; ".join(f"{_if(k, conds[k])}, I'd follow {_quote(a, v, 14)}" for k, v in firsts)
        + "."
    )


def _cpc_unlabelled(a: Analysis, d: Decision, r: _Draft, ids: list[str]) -> None:
    """A context-dependent preference whose memories each give an answer but none names the
    situation it holds for: show the answers themselves and ask which fits this time."""
    shown = sorted(ids, key=lambda i: -a.relevance.get(i, 0.0))[:3]
    if not shown:
        shown = list(a.relevant[:3])
    r.say(
        "Your memories give different answers here, and they read as depending on the "
        "situation rather than contradicting each other, but none of them says which "
        "situation it is for:"
    )
    for i in shown:
        r.bullet(f"{_cap(_said(a, i, 25))}.")
    r.cite(shown)
    if d.action is Action.CLARIFY:
        _why_ask(d, r)
    _ask_what_differs(a, r, shown)


def _why_ask(d: Decision, r: _Draft) -> None:
    """Why a clarification asks before answering: the stakes when they are what decided it,
    otherwise that no memory settles which side applies (a low-risk question is not called
    costly)."""
    if d.risk is RiskTier.LOW:
        r.say("Nothing on record settles which of these applies, so I'd rather ask than guess.")
    else:
        r.say("Because getting this wrong would be costly, I'd rather ask than guess.")


def _ask_what_differs(a: Analysis, r: _Draft, ids: list[str]) -> None:
    """Ask what sets this time apart, naming the first two of ``ids`` as the options, when
    no memory states the situation it holds for (there is no condition to branch on)."""
    if len(ids) >= 2:
        options = [_quote(a, [i], 10) for i in ids[:2]]
        r.ask(
            "What is different about this time, so I can tell which of these applies: "
            f"{options[0]} or {options[1]}?"
        )
    else:
        r.ask("What is different about this time, so I can tell whether that applies?")
    r.say("Once you tell me the situation, I'll answer for it.")


def _if(label: str, cond: str) -> str:
    """ "if you have an early shift" for a when/if clause, else the phrase itself."""
    if re.match(
        r"^(?:only\s+|just\s+|usually\s+|always\s+|mostly\s+)?(?:when|if|while)",
        label.strip(),
        re.I,
    ):
        return f"if {cond}"
    return cond[:1].lower() + cond[1:]


def _quote(a: Analysis, ids: list[str], words: int = 14) -> str:
    best = max(ids, key=lambda i: a.relevance.get(i, 0.0))
    return f'"{_said(a, best, words)}"'


def _strip_lead(clause: str) -> str:
    return re.sub(
        r"^(?:only\s+|just\s+|usually\s+|always\s+|mostly\s+)?(?:when(?:ever)?|if|while)\s+",
        "",
        clause.strip(),
        flags=re.I,
    )


def _or(items: list[str]) -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return items[0] if items else "something else"
    return ", ".join(items[:-1]) + ", or " + items[-1]


def _too_thin(a: Analysis, d: Decision, r: _Draft) -> None:
    """A cluster typed as a conflict shows fewer than two sides or phases among the visible
    memories (the rest fell out of view): there is no contrast to lay out, so answer as for
    memories that may not agree (or commit, when that was the decision)."""
    if d.action is Action.COMMIT:
        _commit(a, d, r)
    else:
        _unsettled(a, d, r)


def _count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _boc(a: Analysis, d: Decision, r: _Draft) -> None:
    t = a.timeline
    phases = list(t.phases) if t else []
    if len(phases) < 2:
        _too_thin(a, d, r)
        return
    # Show the shape, not every switch: the first two and the last four phases.
    shown_phases = phases[:2] + phases[-4:] if len(phases) > 6 else phases
    labels = sorted({p.label for p in phases})
    switches = len(phases) - 1
    approaches = _count(len(labels), "different approach", "different approaches")
    r.say(
        "Your memories show this habit switching back and forth: "
        f"{_count(len(phases), 'phase')} across {approaches}, "
        f"with {_count(switches, 'switch', 'switches')} so far."
    )
    for n, p in enumerate(shown_phases, 1):
        first = a.text(p.members[0])
        when = _month(p.start)
        dur = f", for {p.duration}" if p.duration else ""
        # Name the month only when the memory's own words give it.
        head = f"From {when}{dur}" if p.start and when.split()[0] in first else f"Phase {n}{dur}"
        r.bullet(f"{head}: {_said(a, p.members[0], 28)}.")
        r.cite(list(p.members))
    durations = [p.duration for p in phases if p.duration]
    if durations:
        r.say(
            "No phase has lasted long ("
            + ", ".join(durations)
            + "), so the most recent one is not a safe guess for where you are now."
        )
    else:
        r.say(
            "Since you keep returning to earlier approaches, the latest one may not be where you "
            "are now."
        )
    r.say(
        "The switches don't look random, but your memories don't say what triggers them, "
        "which is the piece that would settle the right approach for now."
    )
    latest = phases[-1]
    other = next((p for p in reversed(phases) if p.label != latest.label), None)
    latest_s = _you(a, short(a.memories[latest.members[0]].value or a.text(latest.members[0]), 16))
    other_s = (
        _you(a, short(a.memories[other.members[0]].value or a.text(other.members[0]), 16))
        if other
        else ""
    )
    if d.action is Action.REVERSIBLE_TRIAL:
        r.say(
            f"A low-cost way forward: try the approach you used most recently ({latest_s}) "
            f"for one week, then check in. It is easy to switch back"
            + (f" to the other approach ({other_s})" if other else "")
            + " if it doesn't fit."
        )
    elif d.action is Action.CONDITIONALIZE and other:
        r.branch(
            f"If you're in the mode of the latest phase ({latest_s})", "keep that routine for now"
        )
        r.branch(f"If you've drifted back to the other mode ({other_s})", "start from that instead")
    r.ask("Which of these modes are you in right now, and what usually makes you switch?")
    if other:
        r.say(
            "If you're still in the latest mode, I'd build on it; if you've gone back to "
            "the other one, I'd plan around that instead; and if something specific triggers "
            "the switch, we can plan for that trigger."
        )


def _source_kind(source: str) -> str:
    s = source.lower()
    if s in ("your own account", "self-report"):
        return "first-hand, but from memory rather than a written record"
    if _is_record(s):
        return "a written record: authoritative when current, but it can be out of date"
    if re.search(
        r"doctor|physician|pediatrician|nurse|pharmacist|lawyer|teacher|school|"
        r"clinic|hospital|bank|court|manager|supervisor|officer|registrar",
        s,
    ):
        return "a professional, but relayed second-hand here"
    return "a personal account: first-hand, but not a record"


_OWN = {"your own account", "self-report", "self report", "user", "self"}
# "<Name>'s <thing> <reports>": a record or account that someone owns speaks (the verbs of
# reporting and recording, a closed class; a copula like "is" states a fact instead).
_OWNED_SOURCE = re.compile(
    r"^(?:the\s+)?([A-Z][a-z]+)['’]s\s+([a-z]+(?:\s+[a-z]+){0,2}?)\s+"
    r"(?:shows|lists|says|states|records|notes|reports|indicates|mentions|confirms|logs|"
    r"claims|insists|suggests|has\s+(?:recorded|logged|noted|listed))\b"
)


def _shown_source(a: Analysis, label: str, ids: list[str]) -> str:
    """The label to show for a side: the source its memory names, never "your own account"
    for a note that opens with someone else's record or account ("Maya's pharmacy shows")."""
    if label.strip().lower() not in _OWN or not ids:
        return label
    best = max(ids, key=lambda i: a.relevance.get(i, 0.0))
    m = _OWNED_SOURCE.match(a.text(best).strip())
    return f"{m.group(1)}'s {m.group(2)}" if m else label


#: A determiner or possessive that opens a source label taken from a sentence's start ("Her
#: son", "The pharmacy label"); inside a sentence it is written in lower case.
_LEAD = re.compile(r"^(?:The|A|An|Her|His|Their|Its|Our|Your)\b")


def _mid(label: str) -> str:
    """A source label as written inside a sentence ("Ask her son", not "Ask Her son"); one
    taken from the user's own words is the user's ("my o2 bill" is "your o2 bill")."""
    label = re.sub(r"^[Mm]y\b", "your", label.strip())
    return _LEAD.sub(lambda m: m.group(0).lower(), label)


def _scc(a: Analysis, d: Decision, r: _Draft) -> None:
    # The sources named, checked and asked about are the same ones (at most four).
    raw = dict([(label, ids) for label, ids in a.sides.items() if ids][:4])
    if len(raw) < 2:
        _too_thin(a, d, r)
        return
    shown = {label: _mid(_shown_source(a, label, ids)) for label, ids in raw.items()}
    if len(set(shown.values())) < len(shown):  # two sides would read the same: keep the graph's
        shown = {label: _mid(label) for label in raw}
    sides = {shown[label]: ids for label, ids in raw.items()}
    r.say(f"Your memories disagree depending on who is telling it ({len(sides)} sources):")
    for label, ids in sides.items():
        r.bullet(f"{_cap(label)}: {_side_claim(a, ids)}.")
        r.cite(ids)
    r.say(
        "Which one governs is the open question: "
        + "; ".join(f"{label} is {_source_kind(label)}" for label in list(sides)[:4])
        + "."
    )
    names = list(sides)
    view = a.source_view
    if view is not None and view.informed:
        r.say(f"When you confirmed before, {view.describe()}.")
        if d.action is Action.COMMIT and view.favoured in raw:
            favoured = shown[view.favoured]
            r.say(
                f"Going by that record, I'd go with {favoured} for now "
                f"({_side_claim(a, sides[favoured])}), and revisit if it turns out wrong."
            )
            r.ask(f"Is that still right, or has {favoured} been wrong here too?")
            return
    if d.action is Action.COMMIT:
        rec = next((s for s in names if _is_record(s)), names[0])
        r.say(
            f"Since the stakes are low and {rec} is a record, I'd go with it for now, and "
            f"revisit if the other account turns out to be newer."
        )
        r.ask(f"Is {rec} still current?")
        return
    if d.action is Action.DEFER:
        r.say(
            "Because this is a high-stakes matter, I'd hold off on acting on it until the "
            "question of which source is current is settled."
        )
    elif a.risk is RiskTier.HIGH:
        r.say(
            "Because the stakes are high, I wouldn't act on "
            + ("either version" if len(names) == 2 else "any of these versions")
            + " until it is confirmed."
        )
    r.say("To settle it:")
    for i, label in enumerate(names, 1):
        if label == "your own account":
            step = "Note when you last confirmed your own account, and what it was based on."
        elif _is_record(label):
            step = f"Look at {label} itself: when was it last updated, and by whom?"
        else:
            step = f"Ask {label} what that is based on and when it was decided."
        r.bullet(f"{i}. {step}")
    r.ask(f"Can you confirm which is current: {_or(names)}?")
    if len(names) >= 2:
        r.say(
            f"If {names[0]} turns out to be current, follow it; if {names[1]} is the newer, "
            f"authoritative one, follow that instead, and update the other."
        )


#: How much of a memory reporting a change a stale answer quotes: the new state is often named
#: after a date and a circumstance ("On 14 March the allergist at Starship did the skin-prick
#: test: ... We came home with an EpiPen"); cut at 24-30 words, answers on blind extra
#: scenarios often stopped before it.
CHANGE_WORDS = 45


def _stale(a: Analysis, d: Decision, r: _Draft) -> None:
    s = a.stale
    if s is None or not s.changes or not s.old:
        _stale_timeline(a, d, r)
        return
    change_id, old_id = s.changes[0], s.old[0]
    old = _said(a, old_id, 24)
    if s.propagated:
        # Every change that reaches the habit, oldest first, each with its date.
        shown = s.changes[:2]
        shown = sorted([*shown, *_also_told(a, [*shown, old_id])], key=lambda i: _when(a, i))
        changes = "; ".join(_said_dated(a, i) for i in shown)
        _stale_propagated(a, d, r, changes, old)
        r.cite([*shown, *s.invalidated[:3]])
        return
    # Changes told at the same time (one conversation's turns) are one change in parts: a new
    # diagnosis and what the doctor said next; quote the two nearest the query.
    when = a.memories[change_id].observed_at
    told = [
        i for i in s.changes[:2] if i == change_id or (when and a.memories[i].observed_at == when)
    ]
    if a.later_state is not None and a.later_state in a.memories:
        # A later turn the layer reads as replacing the graph's change is the state as it now
        # stands; the graph's change is then where it came in (quoted below).
        change_id, told = a.later_state, [a.later_state]
        when = a.memories[change_id].observed_at
    change = "; ".join(_said(a, i, CHANGE_WORDS) for i in told)
    dated = f" ({_month(when)})" if when else ""
    if s.premise:
        r.say(
            f"What I had on record for this is out of date: {old}. That no longer holds; "
            f"more recently{dated}: {change}."
        )
    else:
        r.say(f"Going by the most recent information{dated}: {change}.")
    # Later turns about the new state often no longer name it ("did the Cabot Trail loop,
    # stopped to charge"): the earliest change after the old state is where it came in.
    first = min(
        (i for i in s.changes if i not in told and _when(a, i) < _when(a, change_id)),
        key=lambda i: _when(a, i),
        default=None,
    )
    if first is not None:
        first_when = a.memories[first].observed_at
        r.say(
            "The change came in with this"
            + (f" ({_month(first_when)})" if first_when else "")
            + f": {_said(a, first, CHANGE_WORDS)}."
        )
        told = [*told, first]
    told = [*told, *_say_also_told(a, r, [*told, old_id])]
    old_when = a.memories[old_id].observed_at
    r.say(
        "That replaces the earlier note"
        + (f" from {_month(old_when)}" if old_when else "")
        + f" ({old}), which I keep only as history, so I'd answer for the current state."
    )
    r.cite([*told, *s.superseded[:3]])
    if d.action is Action.VERIFY:
        _confirm_current_state(r, high=d.risk is RiskTier.HIGH)
        return
    r.say("If that has changed again, tell me and I'll plan around the newer situation.")


def _said_dated(a: Analysis, memory_id: str) -> str:
    """A memory reporting a change, quoted to :data:`CHANGE_WORDS`, with its month when dated."""
    when = a.memories[memory_id].observed_at
    return _said(a, memory_id, CHANGE_WORDS) + (f" ({_month(when)})" if when else "")


#: How many more turns read as part of a change a stale answer quotes
#: (:attr:`Analysis.changes_read`).
ALSO_TOLD = 2


def _also_told(a: Analysis, quoted: list[str]) -> list[str]:
    """Up to :data:`ALSO_TOLD` memories the layer read as part of the change
    (:attr:`Analysis.changes_read`) that the answer does not quote yet and that state
    something, in time order."""
    return [i for i in a.changes_read if i not in quoted and i in a.memories and a.stated(i)][
        :ALSO_TOLD
    ]


def _say_also_told(a: Analysis, r: _Draft, quoted: list[str]) -> list[str]:
    """Quote and cite :func:`_also_told`'s memories in one sentence; returns them. A change is
    often told over several turns (the new employer named in one, the first salary in the
    next): whichever turn the answer takes as the latest, the one naming the new state is
    then quoted too."""
    also = _also_told(a, quoted)
    if also:
        r.say(
            "Also on record about that change: " + "; ".join(_said_dated(a, i) for i in also) + "."
        )
        r.cite(also)
    return also


#: The question that asks whether the newest state on record still holds.
_CONFIRM_CURRENT = "Can you confirm the most recent information is still current?"


def _confirm_current_state(r: _Draft, *, high: bool) -> None:
    """The close of a replaced state that is checked: hold both notes until the current one
    is confirmed. Below high stakes the answer gives the reason that holds there (the notes on
    record do not all agree: the guard read them as disagreeing sources, or a later state
    replaced an earlier one) rather than calling the stakes high."""
    if high:
        r.say(
            "Because the stakes are high, I wouldn't act on either note until the current "
            "state is confirmed with whoever holds the record."
        )
    else:
        r.say(
            "Not everything on record agrees on this, so I wouldn't act on either note until "
            "the current state is confirmed."
        )
    r.ask(_CONFIRM_CURRENT)
    r.say(
        "If it is, we go with the current state; if the earlier note still applies, we "
        "plan around that instead."
    )


def _when(a: Analysis, memory_id: str) -> float:
    return memory_time(a.memories[memory_id])


def _stale_propagated(a: Analysis, d: Decision, r: _Draft, change: str, habit: str) -> None:
    if a.stale is not None and a.stale.premise:
        r.say(
            f"What I had on record for this may no longer hold: {habit}. Something changed "
            f"since: {change}."
        )
    else:
        r.say(f"Something changed since you told me that {habit}: {change}.")
    if d.action is Action.COMMIT:
        r.say(f"So I'd plan for the current situation and put the earlier habit ({habit}) on hold.")
        return
    if d.action is Action.VERIFY:
        r.say(
            "That likely affects it for now, so I'd plan for the current situation and put the "
            f"earlier habit ({habit}) on hold. Your memories don't say how serious the change "
            "is or how long it lasts, so check that before going back to it."
        )
        r.ask("Does that change still affect this, and for how long?")
        return
    r.say(
        "That likely affects it for now, but your memories don't say how serious the change "
        "is or how long it lasts, so I won't assume either way."
    )
    if d.action is Action.CLARIFY:
        r.say("Because getting this wrong could be costly, I'd rather ask before planning.")
    else:
        r.branch(
            "If the change still affects you",
            "put the earlier habit on hold and plan around the current situation",
        )
        r.branch("If it no longer affects you", f"carry on as before ({habit})")
    r.ask("Does that change still affect this, and for how long?")
    r.say(
        "If it still does, I'll plan around it; if it no longer does, we go back to the "
        "earlier routine."
    )


def _stale_timeline(a: Analysis, d: Decision, r: _Draft) -> None:
    t = a.timeline
    if not t or not t.phases:
        _commit(a, d, r)
        return
    latest = t.phases[-1]
    earlier = t.phases[0]
    r.say(
        f"Going by the most recent information ({_month(latest.start)}): "
        f"{_said(a, latest.members[0], 30)}."
    )
    r.say(
        f"That replaces the earlier note from {_month(earlier.start)} "
        f"({_said(a, earlier.members[0], 20)}), so I'd plan around the current state."
    )
    r.cite(list(latest.members) + list(earlier.members))
    if d.action is Action.VERIFY:
        _confirm_current_state(r, high=d.risk is RiskTier.HIGH)
        return
    r.ask("Is that still the current situation?")


def _commit(a: Analysis, d: Decision, r: _Draft) -> None:
    if a.resolution is not None:
        src = a.resolution.source
        if src is None or is_self_source(src):
            # The user's own answer, read back to them: "you have an early shift tomorrow".
            r.say(f"You told me: {second_person(short(a.resolution.text, 40), a.subject)}.")
        else:
            r.say(f"This was settled ({src}): {short(a.resolution.text, 40)}.")
        r.cite([a.resolution.id])
        words = set(_text.content_words(a.resolution.text))
        others = [i for i in a.relevant if i != a.resolution.id]
        best = max(
            others,
            key=lambda i: len(words & set(_text.content_words(a.text(i)))),
            default=None,
        )
        if best is not None and words & set(_text.content_words(a.text(best))):
            r.say(f"So I'd go with what your memories say for that case: {_said(a, best, 30)}.")
            r.cite([best])
        else:
            r.say("I'll go with that.")
        return
    # Answer from what the memories state; a stored question or request is not a fact.
    top = [i for i in a.relevant if a.stated(i)][:3]
    if not top:
        r.say("I don't have anything on record about this yet.")
        return
    answer, *more = top
    r.say(f"From what you've told me: {_said(a, answer, 30)}.")
    if more:
        r.say("Also on record: " + "; ".join(_said(a, i, 24) for i in more) + ".")
        r.say("None of your memories says otherwise, so I'd go with that.")
    r.cite(top)


def _unsettled(a: Analysis, d: Decision, r: _Draft) -> None:
    """No conflict cluster was found, yet committing is not justified (the situation reading
    says the memories may depend on context, switch, or disagree): lay them side by side."""
    ids = [i for i in a.relevant if a.stated(i)][:4]
    if len(ids) < 2:
        # The graph's view holds fewer than two statements, but the situation reading read
        # every recalled memory: lay out the nearest statements it read, not one alone.
        nearest = sorted(a.memories, key=lambda i: -a.relevance.get(i, 0.0))
        ids += [i for i in nearest if i not in ids and a.stated(i)][: 4 - len(ids)]
    ids = ids or a.relevant[:3]
    kind = d.conflict_type
    if kind is ConflictType.BOC:
        ids = sorted(ids, key=lambda i: _when(a, i))  # back and forth reads in time order
    if len(ids) < 2:
        # One note cannot be a contrast with itself: say what it leaves open instead.
        r.say(
            "I have only one related note, and I can't tell from it alone whether it settles this:"
        )
        for i in ids:
            r.bullet(_cap(_said(a, i, 30)))
        r.cite(ids)
        if d.action in (Action.VERIFY, Action.DEFER):
            r.say("Before anyone acts on this, I'd check with whoever can settle it.")
        r.ask(f"Can you tell me {d.missing_information or 'whether it applies here'}?")
        return
    lead = {
        ConflictType.CPC: "these may each hold in a different situation",
        ConflictType.BOC: "this seems to have gone back and forth",
        ConflictType.SCC: "these come from different places and may not agree",
    }.get(kind, "these may not all point the same way")
    r.say(f"I can't give you one answer from your memories: {lead}.")
    for i in ids:
        r.bullet(_cap(_said(a, i, 30)))
    r.cite(ids)
    if d.action is Action.CONDITIONALIZE and len(ids) >= 2:
        # "If it's like X, I'd go with X" would say nothing: ask what sets this time apart.
        _ask_what_differs(a, r, ids)
        return
    if d.action is Action.REVERSIBLE_TRIAL and ids:
        r.say(
            "I'd try the most recent one in a way that is easy to undo, and see how it goes "
            "before settling on it."
        )
    elif d.action in (Action.VERIFY, Action.DEFER):
        r.say(
            "Before anyone acts on this, I'd check with whoever can settle it"
            + (", and hold off until then." if d.action is Action.DEFER else ".")
        )
    r.ask(f"Can you tell me {d.missing_information or 'which of these applies now'}?")


def _newest_state(a: Analysis, d: Decision, r: _Draft) -> None:
    """The situation reading says a later state replaced an earlier one the graph did not
    link: answer from the most recent of the memories nearest the query, and name what it
    may replace as history."""
    near = [i for i in a.relevant if a.stated(i)][:4] or a.relevant[:3]
    if not near:
        _nothing_on_record(a, r)
        return
    if a.successor is not None and a.successor in a.memories:
        latest = a.successor
    else:
        latest = max(near, key=lambda i: (_when(a, i), -near.index(i)))
    rules_out = a.successor_rules_out and latest == a.successor
    r.say(f"Going by the most recent thing on record: {_said(a, latest, 30)}.")
    r.cite([latest])
    also = _say_also_told(a, r, [latest])
    earlier = [
        i for i in near if i != latest and i not in also and _when(a, i) <= _when(a, latest)
    ][:2]
    if earlier:
        r.say(
            "That may replace what was said before ("
            + "; ".join(_said(a, i, 18) for i in earlier)
            + "), so I'd treat the earlier note as history and answer for the current state."
        )
        r.cite(earlier)
    if d.action is Action.VERIFY:
        if rules_out and d.risk is not RiskTier.HIGH:
            r.say(
                "Your memories don't say how far that change goes or for how long, so I'd check "
                "that before planning on the earlier note."
            )
            r.ask("Does that change still affect this, and for how long?")
        else:
            r.say(
                ("Because the stakes are high, I" if d.risk is RiskTier.HIGH else "I")
                + "'d confirm the current state before acting on it."
            )
            r.ask(_CONFIRM_CURRENT)
        return
    r.say("If that has changed again, tell me and I'll plan around the newer situation.")


def _nothing_on_record(a: Analysis, r: _Draft) -> None:
    r.say(
        "I don't have anything on record that answers this directly, so I'd rather not guess "
        "from unrelated notes."
    )
    r.ask("Could you tell me a bit about your situation here, or what you usually do?")
    r.say("Once you do, I'll remember it and can answer from it next time.")


class _Draft:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cited: list[str] = []
        self.questions: list[str] = []
        self.branches: dict[str, str] = {}

    def say(self, s: str) -> None:
        self.lines.append(s)

    def bullet(self, s: str) -> None:
        self.lines.append(f"- {s}")

    def cite(self, ids: list[str]) -> None:
        for i in ids:
            if i not in self.cited:
                self.cited.append(i)

    def ask(self, q: str) -> None:
        self.questions.append(q)
        self.lines.append(q)

    def branch(self, cond: str, then: str) -> None:
        self.branches[cond] = then
        self.lines.append(f"- {cond}: {then.rstrip('.')}.")

    def text(self) -> str:
        out: list[str] = []
        for line in self.lines:
            if (line.startswith("- ") and out and not out[-1].startswith("- ")) or line.startswith(
                "- "
            ):
                out.append(line)
            else:
                out.append(("\n" if out else "") + line)
        return "\n".join(out).strip()


def realize_offline(a: Analysis, d: Decision) -> Response:
    """Write the response the decision calls for, citing only visible memories."""
    r = _Draft()
    ctype = a.conflict_type
    if (
        ctype is ConflictType.NONE
        and d.action is Action.CLARIFY
        and d.conflict_type
        in (
            ConflictType.NONE,
            None,
        )
    ):
        _nothing_on_record(a, r)
    elif d.conflict_type is ConflictType.STALE and ctype is not ConflictType.STALE:
        _newest_state(a, d, r)
    elif ctype is ConflictType.NONE and d.action is not Action.COMMIT:
        _unsettled(a, d, r)
    elif d.action is Action.COMMIT and (ctype is ConflictType.NONE or a.resolution is not None):
        _commit(a, d, r)
    elif ctype is ConflictType.CPC:
        _cpc(a, d, r)
    elif ctype is ConflictType.BOC:
        _boc(a, d, r)
    elif ctype is ConflictType.SCC:
        _scc(a, d, r)
    elif ctype is ConflictType.STALE:
        _stale(a, d, r)
    else:
        _commit(a, d, r)
    cited = [i for i in r.cited if i in a.memories]
    return Response(
        text=r.text(),
        decision=d,
        cited_memory_ids=cited,
        questions=r.questions,
        branches=r.branches,
    )
