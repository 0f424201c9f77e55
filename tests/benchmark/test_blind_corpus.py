"""The blind corpus: the frozen test split is unchanged, and no persona crosses splits."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from caap.benchmark.dataset import STYLES, load_dataset
from caap.benchmark.stale import load_stale_scenarios

ROOT = Path(__file__).resolve().parents[2] / "caap" / "benchmark" / "data" / "blind"


def _listed(split: str) -> dict[str, str]:
    rows = (ROOT / split / f"{split.upper()}.sha256").read_text().splitlines()
    return {name: digest for digest, name in (r.split("  ", 1) for r in rows if r.strip())}


def _present(split: str) -> dict[str, str]:
    return {
        str(p.relative_to(ROOT / split)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((ROOT / split).rglob("*.jsonl"))
    }


def test_test_split_is_frozen() -> None:
    assert _present("test") == _listed("test"), (
        "the frozen test split changed: it may not be edited"
    )


def test_guard_sets_are_high_stakes_and_guard2_is_frozen() -> None:
    assert _present("guard2") == _listed("guard2"), "the held-out guard2 set may not be edited"
    for split in ("guard", "guard2"):
        instances = load_dataset(ROOT / split / "tangle")
        assert len(instances) == 60 and all(i.high_risk for i in instances)
        assert {i.conflict_type for i in instances} == {"SCC", "NONE"}
        assert {i.style for i in instances} == set(STYLES)


def test_train2_is_frozen_and_shares_no_persona() -> None:
    """``train2/`` was measured once as data the shipped weights never saw: it stays as its
    writers left it, and its personas are its own."""
    assert _present("train2") == _listed("train2"), "train2 may not be edited"
    mine = {i.persona.id for i in load_dataset(ROOT / "train2" / "tangle")}
    assert len(mine) == 100
    for other in ("test", "train", "dev", "extra", "guard", "guard2"):
        if (ROOT / other / "tangle").is_dir():
            assert not mine & {i.persona.id for i in load_dataset(ROOT / other / "tangle")}


def test_stale2_is_frozen_and_shares_no_persona() -> None:
    """``stale2/`` was measured once as stale scenarios nothing on main was chosen on: it stays
    as its writers left it, a quarter per style and half of each kind, personas its own."""
    assert _present("stale2") == _listed("stale2"), "stale2 may not be edited"
    mine = load_stale_scenarios(ROOT / "stale2" / "stale")
    assert len(mine) == 48 and len({s.persona.id for s in mine}) == 48
    assert sum(s.kind == "direct" for s in mine) == 24
    assert {s.style for s in mine} == set(STYLES)
    assert all(sum(s.style == style for s in mine) == 12 for style in STYLES)
    for other in ("test", "train", "dev", "extra"):
        theirs = {s.persona.id for s in load_stale_scenarios(ROOT / other / "stale")}
        assert not {s.persona.id for s in mine} & theirs


def test_stale3_is_frozen_chatty_and_shares_no_persona() -> None:
    """``stale3/`` (chat style only) was measured once as stale scenarios nothing on main was
    chosen on: it stays as its writers left it, half of each kind, personas its own."""
    assert _present("stale3") == _listed("stale3"), "stale3 may not be edited"
    mine = load_stale_scenarios(ROOT / "stale3" / "stale")
    assert len(mine) == 24 and len({s.persona.id for s in mine}) == 24
    assert sum(s.kind == "direct" for s in mine) == 12
    assert {s.style for s in mine} == {"chatty"}
    for other in ("test", "train", "dev", "extra", "stale2"):
        theirs = {s.persona.id for s in load_stale_scenarios(ROOT / other / "stale")}
        assert not {s.persona.id for s in mine} & theirs


def test_stale4_is_frozen_chatty_and_shares_no_persona() -> None:
    """``stale4/`` (chat style only, 2026-12-05) was frozen before anything was measured on
    it: it stays as its writers left it, half of each kind, personas its own."""
    assert _present("stale4") == _listed("stale4"), "stale4 may not be edited"
    mine = load_stale_scenarios(ROOT / "stale4" / "stale")
    assert len(mine) == 24 and len({s.persona.id for s in mine}) == 24
    assert sum(s.kind == "direct" for s in mine) == 12
    assert {s.style for s in mine} == {"chatty"}
    for other in ("test", "train", "dev", "extra", "stale2", "stale3", "dev2"):
        theirs = {s.persona.id for s in load_stale_scenarios(ROOT / other / "stale")}
        assert not {s.persona.id for s in mine} & theirs


def test_dev2_is_frozen_control_heavy_and_shares_no_persona() -> None:
    """``dev2/`` was measured once as data nothing on main was chosen on: it stays as its
    writers left it, 160 instances (a third controls, ten per style and type mix) and 24 chat
    stale scenarios, personas its own."""
    assert _present("dev2") == _listed("dev2"), "dev2 may not be edited"
    instances = load_dataset(ROOT / "dev2" / "tangle")
    assert len(instances) == 160
    assert sum(i.conflict_type == "NONE" for i in instances) == 56
    assert sum(i.conflict_type == "NONE" and i.high_risk for i in instances) == 24
    assert all(sum(i.style == style for i in instances) == 40 for style in STYLES)
    scenarios = load_stale_scenarios(ROOT / "dev2" / "stale")
    assert len(scenarios) == 24 and {s.style for s in scenarios} == {"chatty"}
    assert sum(s.kind == "direct" for s in scenarios) == 12
    mine = {i.persona.id for i in instances} | {s.persona.id for s in scenarios}
    assert len(mine) == 80 + 24
    for other in ("test", "train", "dev", "extra", "guard", "guard2", "train2"):
        if (ROOT / other / "tangle").is_dir():
            assert not mine & {i.persona.id for i in load_dataset(ROOT / other / "tangle")}
    for other in ("test", "train", "dev", "extra", "stale2", "stale3"):
        assert not mine & {s.persona.id for s in load_stale_scenarios(ROOT / other / "stale")}


def _personas(name: str) -> set[str]:
    """The persona ids of a set's TANGLE instances and stale scenarios (either may be absent)."""
    out: set[str] = set()
    if (ROOT / name / "tangle").is_dir():
        out |= {i.persona.id for i in load_dataset(ROOT / name / "tangle")}
    if (ROOT / name / "stale").is_dir():
        out |= {s.persona.id for s in load_stale_scenarios(ROOT / name / "stale")}
    return out


#: The sets written like the test split after it, each frozen as its writers left it: the set,
#: its instances per conflict type (0: stale scenarios only) and its stale scenarios.
_LIKE_THE_TEST_SPLIT = [("dev3", 20, 24), ("dev4", 20, 24), ("dev5", 0, 36), ("test2", 40, 48)]


@pytest.mark.parametrize(("name", "per_type", "stale"), _LIKE_THE_TEST_SPLIT)
def test_a_set_written_like_the_test_split_is_frozen_in_its_mix_and_shares_no_persona(
    name: str, per_type: int, stale: int
) -> None:
    """``dev3/`` (to measure main once on text nothing was chosen on), ``dev4/`` (to ask S2c
    once more), ``dev5/`` (stale scenarios only, to check RC2) and ``test2/`` (a second test
    split, run by nothing; ``benchmark/PREREG.md`` for each) stay as their writers left them,
    in the test split's mix: per type the same number of instances, half the source conflicts
    and three in ten controls high-risk, a quarter per style, two instances per persona; stale
    scenarios half of each kind, a quarter per style, one per persona; and no persona is shared
    with any other set of the corpus."""
    assert _present(name) == _listed(name), f"{name} may not be edited"
    if per_type:
        instances = load_dataset(ROOT / name / "tangle")
        assert len(instances) == 4 * per_type
        for kind in ("CPC", "BOC", "SCC", "NONE"):
            assert sum(i.conflict_type == kind for i in instances) == per_type
        assert sum(i.conflict_type == "SCC" and i.high_risk for i in instances) == per_type // 2
        assert sum(i.conflict_type == "NONE" and i.high_risk for i in instances) == (
            per_type * 3 // 10
        )
        assert all(sum(i.style == style for i in instances) == per_type for style in STYLES)
    else:
        assert not (ROOT / name / "tangle").exists()
    scenarios = load_stale_scenarios(ROOT / name / "stale")
    assert len(scenarios) == stale and sum(s.kind == "direct" for s in scenarios) == stale // 2
    assert all(sum(s.style == style for s in scenarios) == stale // 4 for style in STYLES)
    mine = _personas(name)
    assert len(mine) == 2 * per_type + stale
    for other in sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name != name):
        assert not mine & _personas(other), other


def test_test_split_loads_with_styles_and_every_type() -> None:
    instances = load_dataset(ROOT / "test" / "tangle")
    assert len(instances) >= 160
    assert {i.style for i in instances} == set(STYLES)
    for kind in ("CPC", "BOC", "SCC", "NONE"):
        assert sum(i.conflict_type == kind for i in instances) >= 40
    scenarios = load_stale_scenarios(ROOT / "test" / "stale")
    assert len(scenarios) >= 40
    assert all(s.style in STYLES for s in scenarios)


@pytest.mark.parametrize("other", ["train", "dev"])
def test_no_persona_crosses_splits(other: str) -> None:
    if not (ROOT / other / "tangle").is_dir():
        pytest.skip(f"no {other} split")
    assert not _personas("test") & _personas(other)
    if other == "dev" and (ROOT / "train" / "tangle").is_dir():
        assert not _personas("train") & _personas("dev")


def test_pair_split_is_labelled_and_shares_no_persona() -> None:
    """``pairs/`` and ``pairs_values/`` (what a pair reader learns from): every line a labelled
    pair with a known relation and style, personas of their own writers only."""
    import json

    from caap.conflict_graph.relations import RELATIONS

    rows = [
        json.loads(line)
        for part in ("pairs", "pairs_values")
        for f in sorted((ROOT / part).glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    assert len(rows) >= 4000
    assert {r["relation"] for r in rows} == set(RELATIONS)
    assert {r["style"] for r in rows} == set(STYLES)
    assert all(r["a"].strip() and r["b"].strip() for r in rows)
    personas = {r["persona"] for r in rows}
    for split in ("test", "train", "dev"):
        assert not personas & _personas(split)


def test_speaker_corpus_is_frozen_labelled_and_split_by_persona() -> None:
    """``speakers/``: memories labelled by who is the source of the claim; the test file is
    frozen by checksum, labels and styles are known, and no persona is in two files."""
    import json

    root = ROOT / "speakers"
    listed = {
        name: digest
        for digest, name in (
            r.split("  ", 1) for r in (root / "SPEAKERS.sha256").read_text().splitlines() if r
        )
    }
    assert listed == {"test.jsonl": hashlib.sha256((root / "test.jsonl").read_bytes()).hexdigest()}
    personas: dict[str, set[str]] = {}
    for name in ("train.jsonl", "train2.jsonl", "dev.jsonl", "dev2.jsonl", "test.jsonl"):
        rows = [json.loads(line) for line in (root / name).read_text().splitlines() if line]
        assert rows
        for row in rows:
            assert set(row) == {"id", "persona", "style", "domain", "text", "speaker"}
            assert row["speaker"] in {"user", "person", "record", "hearsay"}
            assert row["style"] in STYLES and row["text"].strip()
        personas[name] = {r["persona"] for r in rows}
    train = personas["train.jsonl"] | personas["train2.jsonl"]
    dev = personas["dev.jsonl"] | personas["dev2.jsonl"]
    assert not personas["test.jsonl"] & (train | dev)
    assert not train & dev


def _frozen_parts(
    name: str, parts: tuple[str, ...] = ("train", "test")
) -> dict[str, list[dict[str, Any]]]:
    """A labelled set's lines by part (``train/`` and ``test/``), after checking that its
    ``test/`` files are the ones ``test/TEST.sha256`` froze."""
    import json

    root = ROOT / name
    assert _present(f"{name}/test") == {
        file: digest
        for digest, file in (
            r.split("  ", 1) for r in (root / "test" / "TEST.sha256").read_text().splitlines() if r
        )
    }, f"the frozen {name}/test files may not be edited"
    return {
        part: [
            json.loads(line)
            for f in sorted((root / part).glob("*.jsonl"))
            for line in f.read_text().splitlines()
            if line.strip()
        ]
        for part in parts
    }


def _one_anchor_per_group(rows: list[dict[str, Any]]) -> bool:
    """Whether every line of each group has the same anchor ``a``."""
    anchors: dict[str, set[str]] = {}
    for r in rows:
        anchors.setdefault(r["group"], set()).add(r["a"])
    return all(len(a) == 1 for a in anchors.values())


def test_condition_pairs_are_labelled_split_by_persona_and_their_test_is_frozen() -> None:
    """``pairs_conditions/``: pairs with conditions and times written out, on both sides of the
    label; its ``test/`` files are frozen by checksum (they were written before anything was
    fitted), and no persona is in both parts or in another split."""
    from caap.conflict_graph.relations import RELATIONS

    personas: dict[str, set[str]] = {}
    for part, rows in _frozen_parts("pairs_conditions").items():
        assert len(rows) >= 100
        assert {r["relation"] for r in rows} <= set(RELATIONS)
        assert {"agree", "context_partition", "temporal_change"} <= {r["relation"] for r in rows}
        assert all(r["a"].strip() and r["b"].strip() for r in rows)
        personas[part] = {r["persona"] for r in rows}
    # One writer gave one person a group in each part; the test figures leave that group out
    # (`docs/concepts.md`), so what is measured is of people the reader never read.
    assert len(personas["test"] - personas["train"]) >= 0.9 * len(personas["test"])
    for split in ("test", "train", "dev"):
        assert not (personas["train"] | personas["test"]) & _personas(split)


def test_second_condition_pairs_are_labelled_and_their_people_are_their_own() -> None:
    """``pairs_conditions2/``: a second set of pairs with conditions written out, weighted to
    context partitions (training data only: ``pairs_conditions/test`` measures both); none of
    its people is in ``pairs_conditions/``, ``pairs_changes/`` or a split."""
    import json

    from caap.conflict_graph.relations import RELATIONS

    rows = [
        json.loads(line)
        for f in sorted((ROOT / "pairs_conditions2" / "train").glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    assert len(rows) >= 400
    assert {r["relation"] for r in rows} <= set(RELATIONS)
    assert all(r["a"].strip() and r["b"].strip() for r in rows)
    counts = {rel: sum(r["relation"] == rel for r in rows) for rel in RELATIONS}
    assert max(counts, key=lambda rel: counts[rel]) == "context_partition"
    mine = {r["persona"] for r in rows}
    for name in ("pairs_conditions", "pairs_changes"):
        for part, others in _frozen_parts(name).items():
            assert not mine & {r["persona"] for r in others}, (name, part)
    for split in ("test", "train", "dev"):
        assert not mine & _personas(split)


def test_change_pairs_are_labelled_split_by_persona_and_their_test_is_frozen() -> None:
    """``pairs_changes/``: one life change against many earlier memories of the person, those it
    rules out and tempting ones it does not touch; ``test/`` frozen by checksum before anything
    was fitted, and no persona in both parts or in another split."""
    personas: dict[str, set[str]] = {}
    for part, rows in _frozen_parts("pairs_changes").items():
        assert len(rows) >= 100
        assert {r["relation"] for r in rows} == {"agree", "supersedes", "invalidates", "unrelated"}
        assert {r["style"] for r in rows} == set(STYLES)
        assert _one_anchor_per_group(rows)  # one change per group
        personas[part] = {r["persona"] for r in rows}
    assert not personas["train"] & personas["test"]
    for split in ("test", "train", "dev"):
        assert not (personas["train"] | personas["test"]) & _personas(split)


def test_restatement_pairs_are_labelled_split_by_persona_and_their_test_is_frozen() -> None:
    """``pairs_restatements/``: one earlier state against later memories of the person: the
    state said again in passing, news on the topic that changes nothing, and the state
    replaced; ``test/`` frozen by checksum before anything was fitted or measured, and no
    persona in both parts, in another pair set or in a split."""
    personas: dict[str, set[str]] = {}
    for part, rows in _frozen_parts("pairs_restatements").items():
        assert len(rows) >= 100
        assert {"agree", "supersedes", "unrelated"} <= {r["relation"] for r in rows}
        assert {r["style"] for r in rows} == set(STYLES)
        assert _one_anchor_per_group(rows)  # one earlier state per group
        personas[part] = {r["persona"] for r in rows}
    assert not personas["train"] & personas["test"]
    mine = personas["train"] | personas["test"]
    for name in ("pairs_conditions", "pairs_changes"):
        for others in _frozen_parts(name).values():
            assert not mine & {r["persona"] for r in others}, name
    for split in ("test", "train", "dev"):
        assert not mine & _personas(split)


def test_risk_items_are_labelled_split_by_persona_and_their_test_is_frozen() -> None:
    """``risk/``: questions beside remembered facts, labelled by what is at stake, half each in
    every part and the four styles in each; ``test/`` frozen by checksum before anything was
    fitted, one persona per item, none in two parts or in another split."""
    personas: dict[str, set[str]] = {}
    for part, rows in _frozen_parts("risk", ("train", "dev", "test")).items():
        assert len(rows) >= 90
        assert sum(r["high_risk"] is True for r in rows) * 2 == len(rows)
        assert {r["style"] for r in rows} == set(STYLES)
        assert all(r["query"].strip() and 2 <= len(r["memories"]) <= 5 for r in rows)
        personas[part] = {r["persona"]["id"] for r in rows}
        assert len(personas[part]) == len(rows)
    assert not personas["train"] & personas["dev"]
    assert not (personas["train"] | personas["dev"]) & personas["test"]
    for split in ("test", "train", "dev"):
        assert not set().union(*personas.values()) & _personas(split)
