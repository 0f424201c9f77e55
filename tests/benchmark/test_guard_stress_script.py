"""``benchmark/guard_stress.py --relations llm``: the guard replayed with a model the
environment names, over the chat-completions wire, as a user measures theirs (docs/llm.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from caap.benchmark.dataset import load_dataset
from caap.benchmark.guard_stress import guard_stress
from caap.conflict_graph import LearnedRelations
from caap.conflict_graph._relations_llm import LLMRelations
from caap.llm import FunctionModel
from caap.llm.testing import (
    ChatCompletionsServer,
    harmless_relations_reply,
    harmless_relations_response,
)
from caap.policy import CaapPolicy

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "caap" / "benchmark" / "data" / "blind" / "guard" / "tangle"


def _run(dataset: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "benchmark/guard_stress.py",
            "--relations",
            "llm",
            "--dataset",
            str(dataset),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_guard_stress_reads_with_the_model_the_environment_names(
    tmp_path: Path, embedder: Any
) -> None:
    # Ten of guard/'s high-risk instances, conflicts and controls both.
    lines = [ln for f in sorted(GUARD.glob("*.jsonl")) for ln in f.read_text().splitlines()]
    picked = [ln for ln in lines if json.loads(ln)["conflict_type"] == "SCC"][:6]
    picked += [ln for ln in lines if json.loads(ln)["conflict_type"] == "NONE"][:4]
    dataset = tmp_path / "guard10.jsonl"
    dataset.write_text("\n".join(picked) + "\n")

    with ChatCompletionsServer(harmless_relations_response) as server:
        out = _run(
            dataset,
            {
                "CAAP_RELATIONS_MODEL": "openai:harmless",
                "CAAP_LLM_BASE_URL": server.base_url,
                "CAAP_LLM_API_KEY": "test",
            },
        )
        asked = len(server.requests)
    assert out.returncode == 0, out.stderr[-2000:]
    assert asked > 0  # the model read the memories
    assert "relations llm" in out.stdout
    over_the_wire = [
        tuple(int(x) for x in m)
        for m in re.findall(r"let through (\d+)/(\d+); .* standing (\d+)/(\d+)", out.stdout)
    ]

    # The same model in process gives the same replay, so what came over the wire was read (on
    # these ten the `learned` fallback alone leaves a control standing that this model does
    # not: a run that fell back on every call would differ).
    layer = LLMRelations(
        FunctionModel(harmless_relations_reply), fallback=LearnedRelations(embedder=embedder)
    )
    r = guard_stress(load_dataset(dataset), CaapPolicy(relations=layer, embedder=embedder))
    assert over_the_wire == [
        (len(r.let_through[c]), r.conflicts, r.left_standing[c], r.controls) for c in (1, 3)
    ]
    assert (r.conflicts, r.controls) == (6, 4)


def test_guard_stress_with_llm_and_no_model_says_what_to_set() -> None:
    out = _run(GUARD, {"CAAP_RELATIONS_MODEL": ""})
    assert out.returncode == 2
    assert "CAAP_RELATIONS_MODEL" in out.stderr
