"""benchmark/blind_eval.sh end to end on a tiny corpus laid out like the blind one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from caap.benchmark.dataset import load_dataset

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_blind_eval_writes_reports_compare_and_one_summary_table(tmp_path: Path) -> None:
    corpus = tmp_path / "blind" / "dev"
    (corpus / "tangle").mkdir(parents=True)
    (corpus / "stale").mkdir()
    styles = ("dated", "narrative", "implicit", "chatty")
    picked = [i for i in load_dataset() if i.conflict_type in ("CPC", "NONE")][:2]
    (corpus / "tangle" / "x.jsonl").write_text(
        "".join(
            json.dumps({**json.loads(i.model_dump_json(exclude_defaults=True)), "style": s}) + "\n"
            for i, s in zip(picked, styles, strict=False)
        ),
        encoding="utf-8",
    )
    line = (ROOT / "caap/benchmark/data/stale/direct.jsonl").read_text().splitlines()[0]
    (corpus / "stale" / "s.jsonl").write_text(
        json.dumps({**json.loads(line), "style": "chatty"}) + "\n", encoding="utf-8"
    )
    caap = tmp_path / "caap"
    caap.write_text(f'#!/bin/sh\nexec {sys.executable} -m caap.cli "$@"\n', encoding="utf-8")
    caap.chmod(0o755)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RELATIONS": "rules",
        "BASELINES": "always_ask always_conditionalize",
        "BLIND_DIR": str(tmp_path / "blind"),
        "CAAP": str(caap),
    }
    out = tmp_path / "out"
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmark/blind_eval.sh"), str(out), "dev"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for run in ("caap-rules", "always_ask", "always_conditionalize"):
        assert (out / "oracle" / run / "report.json").exists()
    assert (out / "stale" / "caap-rules" / "stale_report.json").exists()
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert summary.splitlines()[0].startswith("| | caap (rules) |")
    assert "stale premise resistance, style chatty" in summary
    assert "acceptable, style narrative" in summary
    assert "acceptable (all)" in (out / "compare.txt").read_text(encoding="utf-8")
