"""The post-decision guard: no backbone lowers the risk or commits on a high-risk matter
without positive evidence (issue 14, item 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from caap.llm import FunctionModel, ScriptedModel
from caap.models import Action, ConflictType, Decision, Memory, RiskTier
from caap.policy import CaapPolicy
from caap.policy._guard import GUARD_TAG, apply_guard, guarded
from tests.scenarios import MEDICATION

COMMIT_LOW = {
    "action": "commit",
    "conflict_type": "NONE",
    "evidence": {"answer": ["m00"]},
    "risk": "low",
    "rationale": "the record is clear",
}
MED_QUERY = "Can I give Maya ibuprofen for her fever tonight?"


def _meds() -> list[Memory]:
    return [Memory(id=f"m{i:02d}", text=t, user_id="maya") for i, t in enumerate(MEDICATION)]


def test_model_commit_on_high_risk_source_conflict_becomes_verify(embedder: Any) -> None:
    model = ScriptedModel([json.dumps(COMMIT_LOW), "Take 5 mg."])
    r = CaapPolicy(model, embedder=embedder).respond(_meds(), MED_QUERY)
    d = r.decision
    assert d.backbone == model.name and d.fallback_reason is None
    assert d.action is Action.VERIFY
    assert d.risk is RiskTier.HIGH  # the model's "low" does not lower the analysis's risk
    assert guarded(d) and GUARD_TAG in d.rationale and "SCC" in d.rationale
    # A model the guard overruled does not write the answer either.
    assert "Take 5 mg" not in r.text and r.questions


def test_model_cannot_lower_risk_even_when_not_committing(embedder: Any) -> None:
    reply = {**COMMIT_LOW, "action": "verify"}
    r = CaapPolicy(ScriptedModel([json.dumps(reply), "Check first [m00]."]), embedder=embedder)
    d = r.decide(_meds(), MED_QUERY)
    assert d.action is Action.VERIFY and d.risk is RiskTier.HIGH
    assert "risk raised from low to high" in d.rationale


def test_every_model_commit_on_the_high_risk_conflict_is_stopped(embedder: Any) -> None:
    # Whatever evidence and conflict type the model claims, the analysis decides.
    policy = CaapPolicy(embedder=embedder)
    a = policy.analyze(_meds(), MED_QUERY)
    assert a.risk is RiskTier.HIGH and a.conflict_type is ConflictType.SCC
    for evidence in ({"answer": ["m00"]}, {"answer": ["m01"]}, {}, {"x": ["m00", "m01"]}):
        for ctype in ConflictType:
            d = Decision(action=Action.COMMIT, conflict_type=ctype, evidence=evidence)
            g = apply_guard(d, a)
            assert g.action is Action.VERIFY and g.risk is RiskTier.HIGH


def test_offline_high_risk_commit_on_hearsay_becomes_verify(embedder: Any) -> None:
    mems = [
        Memory(
            id="h1",
            text="Maya's neighbour says Maya can take a double dose of her asthma medication.",
            user_id="maya",
            source="neighbour",
        ),
        Memory(id="u1", text="Maya plays tennis on Saturdays.", user_id="maya"),
    ]
    policy = CaapPolicy(embedder=embedder)
    q = "Can Maya take a double dose of her asthma medication?"
    a = policy.analyze(mems, q)
    assert a.risk is RiskTier.HIGH
    r = policy.respond(mems, q)
    assert r.decision.action is not Action.COMMIT
    if a.conflict_type is ConflictType.NONE:
        assert guarded(r.decision) and "neighbour" in r.decision.rationale
        assert "confirm" in r.text and r.questions


def test_first_hand_high_risk_fact_without_dispute_still_commits(embedder: Any) -> None:
    mems = [
        Memory(id="u1", text="I am allergic to penicillin.", user_id="sam"),
        Memory(id="u2", text="I like hiking in the Alps.", user_id="sam"),
    ]
    policy = CaapPolicy(embedder=embedder)
    q = "Am I allergic to penicillin? My doctor wants to prescribe medication."
    a = policy.analyze(mems, q)
    assert a.risk is RiskTier.HIGH
    d = policy.decide(mems, q, analysis=a)
    assert d.action is Action.COMMIT and not guarded(d)


def test_guard_applies_to_a_function_model_committing_with_bogus_ids(embedder: Any) -> None:
    def fn(messages: list[Any], schema: dict[str, Any] | None) -> str:
        if schema is None:
            return "Go ahead."
        return json.dumps({**COMMIT_LOW, "evidence": {"answer": ["nope"]}, "risk": "high"})

    d = CaapPolicy(FunctionModel(fn), embedder=embedder).decide(_meds(), MED_QUERY)
    assert d.action is Action.VERIFY and guarded(d)


def _analysis(
    attributed: dict[str, float], situation: Any = None, relevant: list[str] | None = None
) -> Any:
    from caap.policy._analysis import Analysis

    mems = {
        "a": Memory(
            id="a", text="The clinic letter lists peanut as the only allergy.", user_id="u"
        ),
        "b": Memory(id="b", text="Grandma is sure cashews gave him hives.", user_id="u"),
    }
    return Analysis(
        query="Is the cashew pesto safe for him?",
        memories=mems,
        cluster=None,
        relevant=["a", "b"] if relevant is None else relevant,
        relevance={"a": 0.8, "b": 0.7},
        risk=RiskTier.HIGH,
        situation=situation,
        attributed=attributed,
    )


def _commit_on(*ids: str) -> Decision:
    return Decision(
        action=Action.COMMIT,
        conflict_type=ConflictType.NONE,
        evidence={"answer": list(ids)},
        risk=RiskTier.HIGH,
        rationale="they agree",
    )


def test_a_commit_resting_on_someone_elses_account_becomes_verify() -> None:
    # One claim is first-hand; the other is read as another person's account: not positive.
    out = apply_guard(_commit_on("a", "b"), _analysis({"a": 0.1, "b": 0.8}))
    assert out.action is Action.VERIFY and guarded(out)
    assert "memory b" in out.rationale
    # Citing only the first-hand claim does not hide the other account nearest the query.
    only_a = apply_guard(_commit_on("a"), _analysis({"a": 0.1, "b": 0.8}))
    assert only_a.action is Action.VERIFY and "memory b" in only_a.rationale
    far = _analysis({"a": 0.1, "b": 0.8}, relevant=["a"])
    assert apply_guard(_commit_on("a"), far).action is Action.COMMIT


def test_another_account_stands_beside_a_first_hand_claim_only_when_read_as_agreeing() -> None:
    both = frozenset(("a", "b"))
    # Read as agreeing with the first-hand claim: positive evidence for both.
    agree = _analysis({"a": 0.1, "b": 0.8})
    agree.agreement = {both: 0.9}
    assert apply_guard(_commit_on("a", "b"), agree).action is Action.COMMIT
    # Read mostly as a conflict, or just short of agreement: not evidence.
    for share in (0.1, 0.49):
        doubt = _analysis({"a": 0.1, "b": 0.8})
        doubt.agreement = {both: share}
        out = apply_guard(_commit_on("a", "b"), doubt)
        assert out.action is Action.VERIFY and "memory b" in out.rationale
    # Agreement between two second-hand accounts is never enough: one must be first-hand.
    hearsay = _analysis({"a": 0.8, "b": 0.8})
    hearsay.agreement = {both: 1.0}
    assert apply_guard(_commit_on("a", "b"), hearsay).action is Action.VERIFY


def test_two_first_hand_claims_stand_together_only_when_read_as_agreeing() -> None:
    from caap.conflict_graph.relations import SituationVerdict

    both = frozenset(("a", "b"))
    calm = SituationVerdict({"NONE": 0.9, "SCC": 0.1})
    # A record and the user's own account, read as agreeing: positive evidence.
    agree = _analysis({"a": 0.1, "b": 0.2}, calm)
    agree.agreement = {both: 0.8}
    assert apply_guard(_commit_on("a", "b"), agree).action is Action.COMMIT
    # Read as disagreeing, or not read at all: no edge typed is no evidence they agree.
    for readings in ({both: 0.3}, {}):
        doubt = _analysis({"a": 0.1, "b": 0.2}, calm)
        doubt.agreement = readings
        out = apply_guard(_commit_on("a"), doubt)
        assert out.action is Action.VERIFY and guarded(out)
        assert "memories a and b, both first-hand" in out.rationale
    # Read as surely about different things (an aside beside the dose): no dispute; read as
    # maybe unrelated: still not evidence.
    aside = _analysis({"a": 0.1, "b": 0.2}, calm)
    aside.agreement, aside.unrelated = {both: 0.3}, {both: 0.9}
    assert apply_guard(_commit_on("a"), aside).action is Action.COMMIT
    aside.unrelated = {both: 0.6}
    assert apply_guard(_commit_on("a"), aside).action is Action.VERIFY
    # A layer that reads no pairs (no situation reading: ``rules``) is held to its edges.
    rules = _analysis({"a": 0.1, "b": 0.2})
    assert apply_guard(_commit_on("a", "b"), rules).action is Action.COMMIT


def test_first_hand_claims_read_as_agreeing_must_share_their_figures() -> None:
    """A reading of agreement is not evidence against the figures themselves: a sheet and a
    label stating different doses hold the commit, whatever the layer (or a model) read."""
    from caap.conflict_graph.relations import SituationVerdict

    both = frozenset(("a", "b"))
    calm = SituationVerdict({"NONE": 0.9, "SCC": 0.1})

    def doses(a: str, b: str) -> Any:
        out = _analysis({"a": 0.1, "b": 0.1}, calm)
        out.memories = {
            "a": Memory(id="a", text=a, user_id="u"),
            "b": Memory(id="b", text=b, user_id="u"),
        }
        out.agreement = {both: 0.95}
        return out

    sheet = "The doctor's sheet said to inject 12 units of glargine at bedtime."
    held = apply_guard(
        _commit_on("a", "b"), doses(sheet, "The pharmacy label reads glargine, 14 units nightly.")
    )
    assert held.action is Action.VERIFY and guarded(held)
    assert "state different figures (12 against 14)" in held.rationale
    # The same figure in another form, or no figure on one side, stands.
    same = doses(sheet, "The pharmacy label reads glargine, twelve units nightly.")
    assert apply_guard(_commit_on("a", "b"), same).action is Action.COMMIT
    bare = doses(sheet, "The pharmacy label reads glargine at bedtime.")
    assert apply_guard(_commit_on("a", "b"), bare).action is Action.COMMIT
    # Someone else's account read as agreeing stands beside a first-hand claim only with
    # figures it shares.
    told = doses(sheet, "His daughter says the nurse told her 14 units at night.")
    told.attributed = {"a": 0.1, "b": 0.9}
    out = apply_guard(_commit_on("a", "b"), told)
    assert out.action is Action.VERIFY and "memory b" in out.rationale
    # Two deadlines in one year share the year, not a figure: held. The same day written
    # another way still shares its figures, and a claim that states only a year can agree.
    notice = "The land bureau's notice gives 30 November 2026 as the last day to pay."
    later = doses(notice, "The bureau's agent wrote that 31 December 2026 is the last day.")
    out = apply_guard(_commit_on("a", "b"), later)
    assert out.action is Action.VERIFY and "state different figures" in out.rationale
    same_day = doses(notice, "The agent confirmed the 30th of November 2026 is the last day.")
    assert apply_guard(_commit_on("a", "b"), same_day).action is Action.COMMIT
    year_only = doses(notice, "The agent said the fee is due in 2026.")
    assert apply_guard(_commit_on("a", "b"), year_only).action is Action.COMMIT


def test_the_guard_reads_the_situation_model_before_any_calibration_shift() -> None:
    from caap.conflict_graph.relations import SituationVerdict

    both = frozenset(("a", "b"))
    # Shifted towards agreement for the decision, but the model itself read a likely source
    # contradiction: a high-stakes commit has no positive evidence.
    shifted = SituationVerdict({"NONE": 0.8, "SCC": 0.2}, unshifted={"NONE": 0.45, "SCC": 0.55})
    held = _analysis({"a": 0.1, "b": 0.2}, shifted)
    held.agreement = {both: 0.8}
    out = apply_guard(_commit_on("a", "b"), held)
    assert out.action is Action.VERIFY and "(agreement 0.45)" in out.rationale
    # The same shifted reading over a model that itself read agreement: the commit stands.
    calm = SituationVerdict({"NONE": 0.9, "SCC": 0.1}, unshifted={"NONE": 0.6, "SCC": 0.4})
    fine = _analysis({"a": 0.1, "b": 0.2}, calm)
    fine.agreement = {both: 0.8}
    assert apply_guard(_commit_on("a", "b"), fine).action is Action.COMMIT


def test_the_guards_agreement_reading_ignores_the_layers_agreement_weight(
    embedder: Any,
) -> None:
    # The learned layer's verdicts give agreement extra odds for typing edges; the share of
    # agreement the guard reads as positive evidence must stay the pair model's own.
    from caap.conflict_graph import get_relation_layer
    from caap.policy._analysis import _agreement

    layer = get_relation_layer("learned", embedder=embedder)
    texts = [
        "The pharmacy label reads 5 mg of warfarin every evening.",
        "Her daughter says the evening warfarin dose is 7.5 mg now.",
        "The clinic kept the evening dose at 5 mg at the last INR check.",
        "She has held a football season ticket since 1998.",
    ]
    mems = {f"w{i}": Memory(id=f"w{i}", text=t, user_id="u") for i, t in enumerate(texts)}
    ids = list(mems)
    layer.agree_weight = 1.0  # type: ignore[attr-defined]
    own = _agreement(layer, mems, ids)
    layer.agree_weight = 8.0  # type: ignore[attr-defined]
    weighted = _agreement(layer, mems, ids)
    assert set(own) == set(weighted) and len(own) == 6
    for pair, share in own.items():
        assert weighted[pair] == pytest.approx(share, abs=1e-4)
    # The same when the verdicts come through another layer's fallback (an LLM that fails).
    from caap.conflict_graph._relations_llm import LLMRelations

    def broken(messages: list[Any], schema: dict[str, Any] | None) -> str:
        raise RuntimeError("model down")

    llm = LLMRelations(FunctionModel(broken), fallback=layer)
    through = _agreement(llm, mems, ids)
    for pair, share in own.items():
        assert through[pair] == pytest.approx(share, abs=1e-4)


def test_an_unnamed_source_without_a_reading_is_not_first_hand() -> None:
    out = apply_guard(_commit_on("a"), _analysis({}))
    assert out.action is Action.VERIFY and "not known to be first-hand" in out.rationale


def test_a_situation_reading_short_of_agreement_blocks_the_commit() -> None:
    from caap.conflict_graph.relations import SituationVerdict

    doubt = SituationVerdict({"NONE": 0.4, "SCC": 0.6})
    out = apply_guard(_commit_on("a"), _analysis({"a": 0.1}, doubt))
    assert out.action is Action.VERIFY and "agreement 0.40" in out.rationale
    sure = SituationVerdict({"NONE": 0.9, "SCC": 0.1})
    alone = _analysis({"a": 0.1}, sure, relevant=["a"])
    assert apply_guard(_commit_on("a"), alone).action is Action.COMMIT


def test_a_second_risk_reading_high_holds_a_commit_to_the_high_stakes_rule() -> None:
    # The relation layer read low stakes; the risk model the guard also heeds reads high.
    low = _analysis({"a": 0.1, "b": 0.8})
    low.risk = RiskTier.LOW
    commit = _commit_on("a", "b").model_copy(update={"risk": RiskTier.LOW})
    assert apply_guard(commit, low).action is Action.COMMIT
    low.guard_risk = RiskTier.HIGH
    out = apply_guard(commit, low)
    assert out.action is Action.VERIFY and out.risk is RiskTier.HIGH and guarded(out)
    assert "risk model reads this as high stakes" in out.rationale
    # It only ever stops a commit without positive evidence: a first-hand, undisputed one stands.
    low.relevant = ["a"]
    assert apply_guard(commit.model_copy(update={"evidence": {"answer": ["a"]}}), low).action is (
        Action.COMMIT
    )
    # And it never raises what the backbone decides when it does not commit.
    ask = commit.model_copy(update={"action": Action.CLARIFY})
    assert apply_guard(ask, low) == ask


def test_the_rules_layer_is_guarded_by_the_shipped_risk_model(embedder: Any) -> None:
    from caap.policy._analysis import analyze

    mems = [Memory(id=f"m{i}", text=t, user_id="u") for i, t in enumerate(MEDICATION)]
    rules = analyze(mems, MED_QUERY, embedder, relations="rules")
    assert rules.guard_risk is RiskTier.HIGH
    calm = analyze(
        [Memory(id="c", text="I usually order a flat white with oat milk.", user_id="u")],
        "What's my usual coffee order?",
        embedder,
        relations="rules",
    )
    assert calm.guard_risk is RiskTier.LOW
    # A layer with a risk model of its own needs no second reading.
    assert analyze(mems, MED_QUERY, embedder, relations="learned").guard_risk is None


def test_a_model_over_a_rules_fallback_is_read_again_by_the_shipped_layer(
    embedder: Any,
) -> None:
    # A `rules` fallback reads no situations, so the model's reading would be the only one:
    # the shipped fitted layer reads the same memories instead.
    from caap.conflict_graph._relations_llm import LLMRelations
    from caap.llm.testing import harmless_relations_reply
    from caap.policy._analysis import analyze

    layer = LLMRelations(FunctionModel(harmless_relations_reply), fallback="rules")
    a = analyze(_meds(), MED_QUERY, embedder, relations=layer)
    second = a.second_reading()
    assert second is not None and second.evidence_probs["NONE"] < 0.5
    d = CaapPolicy(relations=layer, embedder=embedder).decide(_meds(), MED_QUERY)
    assert d.action is Action.VERIFY and guarded(d) and "fitted reader" in d.rationale


def test_a_model_reading_low_stakes_does_not_lower_the_guards(embedder: Any) -> None:
    # Under `llm` a model that reads a peanut allergy as low stakes and the allergist's letter
    # and an aunt's account as agreeing (the cues read no stakes there either) committed on
    # it; the shipped risk model is the guard's second reading of the stakes, as under `rules`.
    from caap.conflict_graph import LearnedRelations
    from caap.conflict_graph._relations_llm import LLMRelations
    from caap.llm.testing import harmless_relations_reply
    from caap.policy._analysis import analyze

    mems = [
        Memory(id="a", text="Maya's allergist letter says strict peanut avoidance.", user_id="u"),
        Memory(
            id="b",
            text="Her aunt says she ate peanut butter last summer with no problem.",
            user_id="u",
        ),
    ]
    query = "Can Maya have the peanut satay at the party?"
    harmless = FunctionModel(harmless_relations_reply)
    layer = LLMRelations(harmless, fallback=LearnedRelations(embedder=embedder))
    a = analyze(mems, query, embedder, relations=layer)
    assert a.risk is RiskTier.LOW and a.guard_risk is RiskTier.HIGH
    d = CaapPolicy(relations=layer, embedder=embedder).decide(mems, query)
    assert d.action is Action.VERIFY and d.risk is RiskTier.HIGH and guarded(d)
    assert "risk model reads this as high stakes" in d.rationale


def test_agreement_is_read_on_high_stakes_queries_by_a_situation_reading_layer(
    embedder: Any,
) -> None:
    from caap.policy._analysis import AGREEMENT_TOP, analyze

    mems = [Memory(id=f"m{i}", text=t, user_id="u") for i, t in enumerate(MEDICATION)]
    learned = analyze(mems, MED_QUERY, embedder, relations="learned")
    assert learned.risk is RiskTier.HIGH
    top = learned.relevant[:AGREEMENT_TOP]
    assert set(learned.agreement) == {
        frozenset((a, b)) for k, a in enumerate(top) for b in top[k + 1 :]
    }
    assert all(0.0 <= v <= 1.0 for v in learned.agreement.values())
    # Each pair read also carries how sure the layer is that the two are about other things.
    assert set(learned.unrelated) >= set(learned.agreement)
    assert all(0.0 <= v <= 1.0 for v in learned.unrelated.values())
    # Rules read no situation, so a second-hand account never counts under them.
    assert analyze(mems, MED_QUERY, embedder, relations="rules").agreement == {}
    calm = analyze(
        [
            Memory(id="c", text="I usually order a flat white with oat milk.", user_id="u"),
            Memory(id="d", text="My flat white always comes with oat milk.", user_id="u"),
        ],
        "What's my usual coffee order?",
        embedder,
        relations="learned",
    )
    assert calm.risk is not RiskTier.HIGH and calm.agreement == {}


def _reading_every_pair_as(relation: str) -> Any:
    """The shipped learned layer, except that it reads every pair as ``relation`` (the
    reading under test; facets, risk and situations are the layer's own)."""
    from caap.conflict_graph import LearnedRelations
    from caap.conflict_graph.relations import RELATIONS, PairVerdict

    class Reads(LearnedRelations):
        def relate(self, pairs: Any) -> list[PairVerdict]:
            probs = {r: (0.94 if r == relation else 0.01) for r in RELATIONS}
            return [PairVerdict.from_probs(probs) for _ in pairs]

    return Reads()


PARTIES = [
    ("Dr Cardoso", "Dr Cardoso, her cardiologist, prescribed amlodipine 5 mg each morning."),
    ("the pharmacy label", "The pharmacy label reads amlodipine 5 mg, one tablet in the morning."),
    ("Miguel", "Miguel fills her pill organiser with one 5 mg amlodipine tablet each morning."),
]


def test_several_parties_are_a_source_conflict_unless_read_as_agreeing(embedder: Any) -> None:
    from caap.policy._analysis import analyze

    mems = [Memory(id=f"p{i}", text=t, source=s, user_id="u") for i, (s, t) in enumerate(PARTIES)]
    query = "How much amlodipine should she take, and when?"
    agree = analyze(mems, query, embedder, relations=_reading_every_pair_as("agree"))
    assert agree.risk is RiskTier.HIGH
    assert agree.cluster is None or agree.cluster.conflict_type is not ConflictType.SCC
    # The same parties read as contradicting each other: a source conflict.
    doubt = analyze(mems, query, embedder, relations=_reading_every_pair_as("source_contradiction"))
    assert doubt.cluster is not None and doubt.cluster.conflict_type is ConflictType.SCC
    # Rules read no agreement: several parties on a high-stakes matter stay a conflict.
    rules = analyze(mems, query, embedder, relations="rules")
    assert rules.cluster is not None and rules.cluster.conflict_type is ConflictType.SCC


def test_parties_off_the_topic_are_not_made_a_source_conflict(embedder: Any) -> None:
    """Two parties disagreeing about bin day are not the answer to a medication question,
    however few memories the store holds (all of them are among the nearest few). A party
    counts when its memory is as close to the query as an answerable topic must be
    (``min_relevance``); one just above that, on another subject, still would."""
    from caap.policy._analysis import analyze

    bins = [
        ("the landlord", "The landlord says the bins go out on Tuesday nights."),
        ("the council website", "The council website says bin collection is on Wednesdays."),
    ]
    mems = [Memory(id=f"r{i}", text=t, source=s, user_id="u") for i, (s, t) in enumerate(bins)]
    mems += [Memory(id=f"p{i}", text=t, source=s, user_id="u") for i, (s, t) in enumerate(PARTIES)]
    query = "How much amlodipine should she take, and when?"
    for relations in ("rules", "learned"):
        a = analyze(mems, query, embedder, relations=relations)
        assert a.risk is RiskTier.HIGH
        assert a.cluster is None or not {"r0", "r1"} & set(a.cluster.memory_ids), relations
    # Alone in the store, the bin-day parties are still not what the question asks about.
    a = analyze(mems[:2], query, embedder, relations="rules")
    assert a.cluster is None or a.cluster.conflict_type is not ConflictType.SCC


LAUNDRY = [
    "Sofia has had the Sunday 8-11 laundry slot since her first term.",
    "She does her washing on Sunday mornings, 8 to 11, after her asthma check-up at the clinic.",
]


def test_a_sure_low_reading_of_the_risk_model_overrules_a_stray_keyword(embedder: Any) -> None:
    # The keyword cues fire on an inhaler mentioned beside a laundry rota; the fitted risk model
    # is sure the question is low stakes, and only it may overrule them.
    from caap.conflict_graph.relations import resolve_relations
    from caap.policy._analysis import RISK_VETO, _fitted_sure_low, analyze

    texts = LAUNDRY
    query = "When's my laundry slot this week?"
    mems = [Memory(id=f"m{i}", text=t, user_id="sofia") for i, t in enumerate(texts)]
    learned = analyze(mems, query, embedder, relations="learned")
    recalled = [t for i, t in enumerate(texts) if f"m{i}" in learned.relevant]
    assert resolve_relations("rules").risk(query, recalled).tier is RiskTier.HIGH
    assert learned.risk is RiskTier.LOW
    # A high-stakes question keeps HIGH with the same layer.
    meds = [Memory(id=f"m{i}", text=t, user_id="u") for i, t in enumerate(MEDICATION)]
    assert analyze(meds, MED_QUERY, embedder, relations="learned").risk is RiskTier.HIGH
    # A model's reply is never such a reading, however sure (an LLM layer's "low").
    from caap.conflict_graph._relations_llm import LLMRelations
    from caap.conflict_graph.relations import RiskVerdict

    sure = RiskVerdict(RiskTier.LOW, 1.0)
    llm = LLMRelations(ScriptedModel([]), fallback="rules")
    assert not _fitted_sure_low(llm, sure)
    assert _fitted_sure_low(resolve_relations("learned"), sure)
    assert not _fitted_sure_low(
        resolve_relations("learned"), RiskVerdict(RiskTier.LOW, 1 - RISK_VETO)
    )


def test_a_commit_over_disagreeing_sources_is_held_whatever_the_stakes_read() -> None:
    # The risk reading misses stakes it never saw (a payload, a passenger limit); a commit
    # over sources the analysis reads as disagreeing has nothing to rest on at any tier.
    from caap.conflict_graph.relations import SituationVerdict
    from caap.models import ConflictCluster

    def commit(risk: RiskTier) -> Decision:
        return _commit_on("a").model_copy(update={"risk": risk})

    low = _analysis({"a": 0.1, "b": 0.8})
    low.risk = RiskTier.LOW
    assert apply_guard(commit(RiskTier.LOW), low).action is Action.COMMIT
    typed = _analysis({"a": 0.1, "b": 0.8})
    typed.risk = RiskTier.LOW
    typed.cluster = ConflictCluster(
        id="u::x", user_id="u", aspect="x", memory_ids=["a", "b"],
        conflict_type=ConflictType.SCC,
    )  # fmt: skip
    out = apply_guard(commit(RiskTier.LOW), typed)
    assert out.action is Action.VERIFY and guarded(out)
    assert out.risk is RiskTier.LOW  # held, not re-rated
    read = _analysis({"a": 0.1, "b": 0.8}, SituationVerdict({"SCC": 0.6, "NONE": 0.4}))
    read.risk = RiskTier.MEDIUM
    assert apply_guard(commit(RiskTier.MEDIUM), read).action is Action.VERIFY
    calm = _analysis({"a": 0.1, "b": 0.8}, SituationVerdict({"SCC": 0.3, "NONE": 0.7}))
    calm.risk = RiskTier.MEDIUM
    assert apply_guard(commit(RiskTier.MEDIUM), calm).action is Action.COMMIT
    # A later confirmation that settles the contradiction lets the commit stand.
    typed.resolution = typed.memories["a"]
    assert apply_guard(commit(RiskTier.LOW), typed).action is Action.COMMIT


def test_a_commit_stands_only_when_the_second_reader_also_reads_agreement() -> None:
    # Under `rules` the cues may find nothing in conflict where the fitted reader does (sources
    # named in words the cues do not list): both readers must read agreement, at any stakes.
    from caap.conflict_graph.relations import SituationVerdict

    calls: list[int] = []

    def reading(verdict: SituationVerdict) -> Any:
        def read() -> SituationVerdict:
            calls.append(1)
            return verdict

        return read

    def low(verdict: SituationVerdict) -> Any:
        a = _analysis({"a": 0.1, "b": 0.8})
        a.risk = RiskTier.LOW
        a.guard_reading = reading(verdict)
        return a

    commit = _commit_on("a").model_copy(update={"risk": RiskTier.LOW})
    doubt = low(SituationVerdict({"NONE": 0.3, "BOC": 0.6, "SCC": 0.1}))
    out = apply_guard(commit, doubt)
    assert out.action is Action.VERIFY and guarded(out) and out.risk is RiskTier.LOW
    assert "fitted reader" in out.rationale and "agreement 0.30" in out.rationale
    assert apply_guard(commit, low(SituationVerdict({"NONE": 0.7, "SCC": 0.3}))) == commit
    # Its own reading before any calibration shift is what counts.
    shifted = SituationVerdict({"NONE": 0.8, "SCC": 0.2}, unshifted={"NONE": 0.4, "SCC": 0.6})
    assert apply_guard(commit, low(shifted)).action is Action.VERIFY
    # Read once per analysis, and only for a commit.
    calls.clear()
    once = low(SituationVerdict({"NONE": 0.3, "SCC": 0.7}))
    once.risk = RiskTier.HIGH
    apply_guard(commit.model_copy(update={"risk": RiskTier.HIGH}), once)
    once.second_reading()
    assert len(calls) == 1
    calls.clear()
    ask = commit.model_copy(update={"action": Action.CLARIFY})
    assert apply_guard(ask, low(SituationVerdict({"NONE": 0.1, "SCC": 0.9}))) == ask
    assert calls == []


def test_the_rules_layer_gets_the_fitted_layers_second_reading(embedder: Any) -> None:
    from caap.policy._analysis import analyze

    mems = [Memory(id=f"m{i}", text=t, user_id="u") for i, t in enumerate(MEDICATION)]
    rules = analyze(mems, MED_QUERY, embedder, relations="rules")
    second = rules.second_reading()
    assert second is not None and abs(sum(second.probs.values()) - 1.0) < 1e-6
    # A layer that reads situations itself is held to its own reading.
    learned = analyze(mems, MED_QUERY, embedder, relations="learned")
    assert learned.guard_reading is None and learned.second_reading() is None


def test_a_second_reading_holds_what_the_layers_own_reading_would_let_through() -> None:
    # The layer's own reading finds the memories agreeing; its second reader (``llm``'s fitted
    # fallback) does not. A high-stakes commit is held; at any stakes so is one the second
    # reader reads as disagreeing sources; its reading of a change alone does not hold a
    # low-stakes commit (a layer that reads situations is not held to agreement there).
    from caap.conflict_graph.relations import SituationVerdict
    from caap.models import ConflictCluster

    agree = SituationVerdict({"NONE": 0.9, "SCC": 0.1})

    def second(verdict: SituationVerdict, risk: RiskTier) -> Any:
        a = _analysis({"a": 0.1}, agree, relevant=["a"])
        a.risk = risk
        a.guard_reading = lambda: verdict
        return a

    high = _commit_on("a")
    assert apply_guard(high, second(agree, RiskTier.HIGH)).action is Action.COMMIT
    out = apply_guard(high, second(SituationVerdict({"NONE": 0.3, "BOC": 0.7}), RiskTier.HIGH))
    assert out.action is Action.VERIFY and guarded(out) and "agreement 0.30" in out.rationale
    low = high.model_copy(update={"risk": RiskTier.LOW})
    scc = SituationVerdict({"NONE": 0.35, "SCC": 0.65})
    out = apply_guard(low, second(scc, RiskTier.LOW))
    assert out.action is Action.VERIFY and "second reader" in out.rationale
    assert out.risk is RiskTier.LOW
    change = SituationVerdict({"NONE": 0.2, "STALE": 0.8})
    assert apply_guard(low, second(change, RiskTier.LOW)) == low
    # Where a later confirmation settled a conflict the graph typed, the layer is still held
    # to its own reading at high stakes, and so to the second one.
    settled = second(SituationVerdict({"NONE": 0.3, "SCC": 0.7}), RiskTier.HIGH)
    settled.cluster = ConflictCluster(
        id="u::x", user_id="u", aspect="x", memory_ids=["a"], conflict_type=ConflictType.SCC
    )
    settled.resolution = settled.memories["a"]
    held = apply_guard(high.model_copy(update={"evidence": {"resolution": ["a"]}}), settled)
    assert held.action is Action.VERIFY and guarded(held)


def test_a_model_reading_agreement_is_not_the_only_evidence_for_a_high_stakes_commit(
    embedder: Any,
) -> None:
    # The unsafe case under the `llm` relation layer: a clinic record and a parent's
    # account disagree about a medicine. A model that reads them as agreeing gave the offline
    # policy a clean "agree" (no conflict typed, the parent's account read as agreeing with
    # the record), and the commit stood; the fitted fallback reads the same memories as
    # disagreeing sources, and the guard heeds it. Over the wire, with the local server.
    from caap.conflict_graph import LearnedRelations
    from caap.conflict_graph._relations_llm import LLMRelations
    from caap.llm import OpenAIChatModel
    from caap.llm.testing import ChatCompletionsServer, harmless_relations_response

    with ChatCompletionsServer(harmless_relations_response) as server:
        model = OpenAIChatModel("test-model", base_url=server.base_url, timeout=5.0, max_retries=0)
        layer = LLMRelations(model, fallback=LearnedRelations(embedder=embedder))
        a = _analyze_with(layer, embedder)
        d = CaapPolicy(relations=layer, embedder=embedder).decide(_meds(), MED_QUERY)
        asked = [r for r in server.requests if "how likely each reading" in json.dumps(r)]
    assert asked, "the model read the situation"
    assert a.situation is not None and a.situation.probs["NONE"] > 0.9  # the model's reading
    second = a.second_reading()
    assert second is not None and second.evidence_probs["NONE"] < 0.5
    assert d.action is Action.VERIFY and guarded(d)
    assert "fitted reader" in d.rationale


def _analyze_with(layer: Any, embedder: Any) -> Any:
    from caap.policy._analysis import analyze

    return analyze(_meds(), MED_QUERY, embedder, relations=layer)


def test_weights_refitted_on_other_data_are_guarded_by_the_shipped_reader(
    tmp_path: Any, embedder: Any
) -> None:
    # Users train the learned layer on their own data (`caap relations train`); no guard stress
    # measured their weights. Weights that read every pair and every situation as agreeing
    # committed on the clinic record against the parent's account; the shipped fitted layer
    # reads the same memories as disagreeing sources, and the guard heeds it and its stakes.
    import numpy as np

    from caap.conflict_graph import LearnedRelations
    from caap.conflict_graph._relations_learned import default_weights_path
    from caap.conflict_graph.relations import RELATIONS
    from caap.policy._analysis import analyze

    with np.load(default_weights_path()) as z:
        w = {k: z[k] for k in z.files}
    for model, first in (("sit", 0), ("pair", RELATIONS.index("agree"))):
        w[f"{model}_w"] = np.zeros_like(w[f"{model}_w"])
        bias = np.full_like(w[f"{model}_b"], -10.0)
        bias[first] = 10.0  # NONE for the situation model, agree for the pair model
        w[f"{model}_b"] = bias
    np.savez_compressed(tmp_path / "agreeing.npz", **w)
    layer = LearnedRelations(weights=tmp_path / "agreeing.npz", embedder=embedder)
    a = analyze(_meds(), MED_QUERY, embedder, relations=layer)
    assert a.situation is not None and a.situation.probs["NONE"] > 0.99
    assert a.conflict_type is ConflictType.NONE and a.guard_risk is RiskTier.HIGH
    second = a.second_reading()
    assert second is not None and second.evidence_probs["NONE"] < 0.5
    d = CaapPolicy(relations=layer, embedder=embedder).decide(_meds(), MED_QUERY)
    assert d.action is Action.VERIFY and guarded(d) and "fitted reader" in d.rationale
    # The shipped weights are the guard's own reader: no second reading of them.
    shipped = analyze(_meds(), MED_QUERY, embedder, relations=LearnedRelations(embedder=embedder))
    assert shipped.guard_risk is None and shipped.second_reading() is None


def test_a_track_record_stands_against_the_situation_reading_only_at_low_stakes() -> None:
    # The user's confirmed outcomes for these sources settle a typed source conflict where the
    # offline policy commits on them (low stakes); above that the layer's reading of the
    # sources as disagreeing still holds a commit.
    from caap.conflict_graph.relations import SituationVerdict
    from caap.conflict_graph.reliability import Posterior
    from caap.models import ConflictCluster
    from caap.policy._reliability import SourceView

    def settled(risk: RiskTier) -> Any:
        a = _analysis({"a": 0.1, "b": 0.8}, SituationVerdict({"SCC": 0.9, "NONE": 0.1}))
        a.risk = risk
        a.cluster = ConflictCluster(
            id="u::x", user_id="u", aspect="x", memory_ids=["a", "b"],
            conflict_type=ConflictType.SCC,
        )  # fmt: skip
        a.source_view = SourceView(
            posterior=Posterior(
                question="x", probs={"peanut": 0.9, "cashew": 0.1}, answer="peanut",
                margin=0.8, threshold=0.5,
            ),
            claims={"clinic letter": "peanut", "Grandma": "cashew"},
            track={"clinic letter": (3, 0), "Grandma": (0, 3)},
        )  # fmt: skip
        return a

    def commit(risk: RiskTier) -> Decision:
        return _commit_on("a").model_copy(update={"risk": risk, "conflict_type": ConflictType.SCC})

    assert settled(RiskTier.LOW).favoured_by_track_record == "clinic letter"
    assert apply_guard(commit(RiskTier.LOW), settled(RiskTier.LOW)).action is Action.COMMIT
    held = apply_guard(commit(RiskTier.MEDIUM), settled(RiskTier.MEDIUM))
    assert held.action is Action.VERIFY and guarded(held)
    assert "source contradiction 0.90" in held.rationale


def _development_sets() -> list[Any]:
    from pathlib import Path

    import caap
    from caap.benchmark.dataset import load_dataset

    root = Path(caap.__file__).parent / "benchmark" / "data" / "blind"
    return [i for s in ("guard", "extra", "dev") for i in load_dataset(root / s / "tangle")]


def test_the_learned_guard_holds_the_development_sets_conflicts(embedder: Any) -> None:
    """Under a backbone that commits on everything, the shipped learned layer's guard lets at
    most one of the 56 high-risk conflicts of blind ``guard/``, ``extra/`` and ``dev/`` through
    (the one it misreads compares a ticket's dates as agreeing; docs/benchmark.md), and still
    lets some high-risk controls' commits stand. Weights that read disagreeing accounts as
    agreeing fail it: a reader retrained with every pair set let three through."""
    from caap.benchmark.guard_stress import guard_stress

    r = guard_stress(_development_sets(), CaapPolicy(relations="learned", embedder=embedder))
    assert (r.instances, r.conflicts, r.controls) == (89, 56, 33)
    for cite in (1, 3):
        assert len(r.let_through[cite]) <= 1, r.let_through[cite]
        assert r.left_standing[cite] >= 1


def test_a_relation_model_reading_everything_as_harmless_does_not_open_the_guard(
    embedder: Any,
) -> None:
    """Under the `llm` layer over a model that reads every statement as the user's own,
    everything as agreeing and every question as low stakes, a backbone committing on
    everything gets at most one of blind ``guard/``'s 40 high-risk conflicts through, as the
    shipped layer does (before the guard's second readings under `llm`, 53 of the 89 of
    ``guard/``, dev, extra and train; docs/benchmark.md)."""
    from pathlib import Path

    import caap
    from caap.benchmark.dataset import load_dataset
    from caap.benchmark.guard_stress import guard_stress
    from caap.conflict_graph import LearnedRelations
    from caap.conflict_graph._relations_llm import LLMRelations
    from caap.llm.testing import harmless_relations_reply

    guard = load_dataset(
        Path(caap.__file__).parent / "benchmark" / "data" / "blind" / "guard" / "tangle"
    )
    layer = LLMRelations(
        FunctionModel(harmless_relations_reply), fallback=LearnedRelations(embedder=embedder)
    )
    r = guard_stress(guard, CaapPolicy(relations=layer, embedder=embedder))
    assert (r.conflicts, r.controls) == (40, 20)
    for cite in (1, 3):
        assert len(r.let_through[cite]) <= 1, r.let_through[cite]


def test_guard_stress_refuses_what_it_cannot_replay(embedder: Any) -> None:
    from caap.benchmark.guard_stress import guard_stress

    policy = CaapPolicy(embedder=embedder)
    instances = _development_sets()
    everyday = [i for i in instances if not i.high_risk]
    with pytest.raises(ValueError, match="no high-risk instance"):
        guard_stress(everyday, policy)
    with pytest.raises(ValueError, match="cites must be positive"):
        guard_stress(instances[:1], policy, cites=(0,))
