"""What a policy sees of an oracle instance: seeded shuffle, opaque ids, no annotations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caap.benchmark.dataset import Instance, load_dataset
from caap.benchmark.presentation import PRESENTED_AT, present

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def instances() -> list[Instance]:
    return load_dataset()


@pytest.fixture(scope="module")
def inst(instances: list[Instance]) -> Instance:
    return instances[0]


def test_default_shows_core_background_and_every_distractor(inst: Instance) -> None:
    shown = present(inst)
    expected = {m.id for m in inst.memories}
    assert set(shown.shown_ids.values()) == expected
    assert len(shown.memories) == len(inst.memories)


def test_ids_are_opaque_and_in_shown_order(inst: Instance) -> None:
    shown = present(inst)
    ids = [m.id for m in shown.memories]
    assert ids == [f"mem-{i:02d}" for i in range(1, len(ids) + 1)]
    for m in shown.memories:
        original = inst.memory(shown.shown_ids[m.id])
        assert m.text == original.text == shown.shown_texts[m.id]
    assert shown.instance_ids == [shown.shown_ids[i] for i in ids]


def test_policy_sees_no_annotations(inst: Instance) -> None:
    shown = present(inst)
    for m in shown.memories:
        assert m.user_id == f"tangle:{inst.persona.id}"
        assert (m.source, m.context, m.aspect, m.value, m.observed_at) == (None,) * 5
        assert m.metadata == {} and m.provenance == {}
        # One fixed record time for all: created_at carries no order or role.
        assert m.created_at == PRESENTED_AT
        dumped = json.dumps(m.model_dump(mode="json"))
        for leak in ("core", "background", "distractor", inst.conflict_type, inst.domain):
            assert f'"{leak}"' not in dumped


@pytest.mark.parametrize("n", [0, 2, 4, 6])
def test_distractor_count_takes_the_first_n_in_file_order(inst: Instance, n: int) -> None:
    shown = present(inst, distractors=n)
    distractors = [m.id for m in inst.by_role("distractor")]
    got = {i for i in shown.shown_ids.values() if i in distractors}
    assert got == set(distractors[:n])
    others = [m for m in inst.memories if m.role != "distractor"]
    assert len(shown.memories) == len(others) + n


@pytest.mark.parametrize("bad", [-1, 7, 100])
def test_distractor_count_out_of_range_is_rejected(inst: Instance, bad: int) -> None:
    with pytest.raises(ValueError, match="distractors") as info:
        present(inst, distractors=bad)
    assert str(bad) in str(info.value) and inst.id in str(info.value)


def test_shuffle_is_seeded_per_instance(instances: list[Instance]) -> None:
    a, b = instances[0], instances[1]
    order = [present(a, seed=0).instance_ids for _ in range(3)]
    assert order[0] == order[1] == order[2]
    seeds = {tuple(present(a, seed=s).instance_ids) for s in range(6)}
    assert len(seeds) > 1, "different seeds should give different orders"
    # Not the file order, and the same seed shuffles two instances differently.
    assert present(a).instance_ids != [m.id for m in a.memories]
    pos_a = [m.role for m in (a.memory(i) for i in present(a).instance_ids)]
    pos_b = [m.role for m in (b.memory(i) for i in present(b).instance_ids)]
    assert pos_a != pos_b


def test_shuffle_is_stable_across_processes(inst: Instance) -> None:
    code = (
        "from caap.benchmark.dataset import load_dataset;"
        "from caap.benchmark.presentation import present;"
        "print(','.join(present(load_dataset()[0], seed=7).instance_ids))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip().split(",") == present(inst, seed=7).instance_ids
