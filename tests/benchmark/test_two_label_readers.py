"""benchmark/two_label_readers.py: the pairs it trains two-label readers on, and its reading."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from caap.benchmark.dataset import load_dataset
from caap.benchmark.stale import load_stale_scenarios
from caap.policy._speech import stated_part
from tests._scripts import load_script

ROOT = Path(__file__).parents[2]
BLIND = ROOT / "caap" / "benchmark" / "data" / "blind"


def _module() -> ModuleType:
    return load_script("benchmark/two_label_readers.py")


def test_query_pairs_label_probes_and_queries_against_their_turns_and_memories() -> None:
    mod = _module()
    pairs = mod.query_pairs("dev")
    label = {(q, text): lab for q, text, lab in pairs}
    sc = load_stale_scenarios(BLIND / "dev" / "stale")[0]
    for t in (t for s in sc.sessions for t in s.turns if t.role == "user"):
        text = stated_part(t.content) or t.content
        for p in sc.probes:
            got = label.get((p.query, text))
            if t.tag in ("old", "update"):
                assert got == "relevant"
            elif t.tag == "distractor":
                assert got == "not_relevant"
            else:  # background and untagged turns are neither
                assert got is None
    inst = load_dataset(BLIND / "dev" / "tangle")[0]
    for m in inst.memories:
        want = "not_relevant" if m.role == "distractor" else "relevant"
        assert label[(inst.query, m.text)] == want
    assert len(pairs) == len(set(pairs))


def test_reach_pairs_take_each_old_turn_against_every_later_update() -> None:
    mod = _module()
    pairs = mod.reach_pairs("dev")
    scenarios = load_stale_scenarios(BLIND / "dev" / "stale")
    assert {k for *_, k in pairs} == {"direct", "propagated"}
    sc = scenarios[0]
    said = [
        (t.tag, stated_part(t.content) or t.content)
        for s in sorted(sc.sessions, key=lambda s: (s.date, s.id))
        for t in s.turns
        if t.role == "user" and t.tag in ("old", "update")
    ]
    want = {
        (a, b, sc.kind)
        for i, (first, a) in enumerate(said)
        for then, b in said[i + 1 :]
        if (first, then) == ("old", "update")
    }
    assert want and want <= set(pairs)
    assert not any(b == a for a, b, _ in pairs)


def test_auc_counts_ties_as_half_and_needs_both_classes() -> None:
    mod = _module()
    y = np.array([True, True, False, False])
    assert mod.auc(np.array([0.9, 0.8, 0.1, 0.2]), y) == 1.0
    assert mod.auc(np.array([0.1, 0.2, 0.9, 0.8]), y) == 0.0
    assert mod.auc(np.array([0.5, 0.5, 0.5, 0.5]), y) == 0.5
    with pytest.raises(ValueError, match="both classes"):
        mod.auc(np.array([0.1, 0.2]), np.array([True, True]))


def test_agree_pairs_keep_agreeing_and_contradicting_pairs_only() -> None:
    from caap.conflict_graph._relations_train import load_corpus

    mod = _module()
    pairs = mod.agree_pairs("dev", tangle_only=True)
    labelled = load_corpus(BLIND / "dev" / "tangle").pairs
    want = {"agree": "same", "source_contradiction": "differ"}
    expected = {(e.a, e.b, want[e.relation]) for e in labelled if e.relation in want}
    assert set(pairs) == expected
    assert {k for *_, k in pairs} == {"same", "differ"}
    # the whole split reads its stale scenarios' labelled pairs too
    assert set(pairs) <= set(mod.agree_pairs("dev"))
