"""``caap relations eval``: how a relation layer reads labelled pairs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from caap.conflict_graph._relations_rules import RulesRelations
from caap.conflict_graph._relations_train import evaluate_pairs
from caap.conflict_graph.relations import MemoryView, PairVerdict, get_relation_layer

PAIRS = [
    # Two named sources, two values.
    {
        "a": "The clinic record says Ana takes 5 mg of amlodipine.",
        "b": "The pharmacy label says Ana takes 10 mg of amlodipine.",
        "relation": "source_contradiction",
        "persona": "x1",
    },
    # The same value twice: agreement.
    {
        "a": "Ana takes 5 mg of amlodipine every morning.",
        "b": "Ana takes 5 mg of amlodipine every morning with breakfast.",
        "relation": "agree",
        "persona": "x1",
    },
    # Another subject.
    {
        "a": "Ana takes 5 mg of amlodipine every morning.",
        "b": "Ana's garden shed needs a new roof.",
        "relation": "unrelated",
        "persona": "x1",
    },
]


_EVAL = [sys.executable, "-m", "caap.cli", "relations", "eval", "--relations", "rules"]


def _write(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class _ReadsAgreement(RulesRelations):
    """A layer that reads every pair as agreeing (a known input for the report's counts)."""

    def relate(self, pairs: Sequence[tuple[MemoryView, MemoryView]]) -> list[PairVerdict]:
        assert all(a.vector is not None and b.vector is not None for a, b in pairs)
        return [PairVerdict.certain("agree", "always") for _ in pairs]


def test_the_report_counts_what_the_layer_read(tmp_path: Path, embedder: Any) -> None:
    report = evaluate_pairs(_write(tmp_path, PAIRS), _ReadsAgreement(), embedder=embedder)
    assert report["pairs"] == 3
    assert report["recall"] == {
        "agree": [1, 1],
        "source_contradiction": [0, 1],
        "unrelated": [0, 1],
    }
    assert report["accuracy"] == pytest.approx(1 / 3)
    assert report["conflict_read_as_agree"] == [1, 1]
    assert report["agree_read_as_conflict"] == [0, 1]
    # The rules read the same file otherwise: the report follows the layer.
    rules = evaluate_pairs(_write(tmp_path, PAIRS), get_relation_layer("rules"), embedder=embedder)
    assert rules["recall"]["unrelated"] == [1, 1]


def test_no_labelled_pair_is_an_error(tmp_path: Path, embedder: Any) -> None:
    empty = tmp_path / "none.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no labelled pairs"):
        evaluate_pairs(empty, get_relation_layer("rules"), embedder=embedder)


def test_the_command_prints_recall_per_relation(tmp_path: Path) -> None:
    path = _write(tmp_path, PAIRS)
    out = subprocess.run(
        [*_EVAL, "--data", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["pairs"] == 3
    assert all(n == 1 for _, n in report["recall"].values())
    bad = subprocess.run(
        [*_EVAL, "--weights", "w.npz", "--data", str(path)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "--weights is for --relations learned" in bad.stderr
