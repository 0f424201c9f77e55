"""benchmark/dev_sets.sh: the development runs a keep rule is checked on, and nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmark" / "dev_sets.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _fake_python(tmp_path: Path, fail_on: str = "") -> Path:
    """An interpreter stand-in that records each command line (and PYTHONPATH) and fails
    when its arguments contain ``fail_on``."""
    fake = tmp_path / "fakepy"
    check = f'case "$*" in *{fail_on}*) exit 3;; esac\n' if fail_on else ""
    fake.write_text(
        f'#!/bin/sh\necho "$PYTHONPATH | $(pwd) | $*" >> "$FAKE_LOG"\n{check}', encoding="utf-8"
    )
    fake.chmod(0o755)
    return fake


def _run(tmp_path: Path, fake: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": str(fake), "FAKE_LOG": str(tmp_path / "log")}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_development_set_runs_and_the_held_out_ones_never(tmp_path: Path) -> None:
    tree = tmp_path / "candidate"
    tree.mkdir()
    done = _run(tmp_path, _fake_python(tmp_path), str(tree))
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "log").read_text(encoding="utf-8").splitlines()
    stale = sorted(ln.split("blind/")[1].split("/")[0] for ln in lines if "probe-stale" in ln)
    tangle = sorted(ln.split("blind/")[1].split("/")[0] for ln in lines if "tangle run" in ln)
    assert stale == sorted(
        ["stale3", "dev2", "stale4", "stale2", "train", "dev", "extra", "dev3", "dev4", "dev5"]
    )
    assert tangle == sorted(["dev", "extra", "guard", "dev2", "dev3", "dev4"])
    assert not any("blind/test" in ln or "guard2" in ln for ln in lines)
    # the candidate's tree is what Python imports caap from: first on the path, and the
    # working directory (which `python -m` puts before it)
    assert all(ln.startswith(f"{tree} | {tree} |") for ln in lines)
    # the reports land where asked, whatever the working directory
    assert all(f"--out {tmp_path / 'out'}/" in ln for ln in lines)
    assert all("--relations learned" in ln for ln in lines)


@pytest.mark.parametrize(
    ("fail_on", "never"),
    [("blind/stale2/", "blind/train/"), ("blind/stale3/", "blind/dev2/stale")],
    ids=["foreground lane", "background lane"],
)
def test_a_failed_run_fails_the_script(tmp_path: Path, fail_on: str, never: str) -> None:
    done = _run(tmp_path, _fake_python(tmp_path, fail_on=fail_on))
    assert done.returncode != 0
    assert "failed, see its log" in done.stderr
    # the lane stops at the failed run: the next set on its lane never starts
    assert never not in (tmp_path / "log").read_text(encoding="utf-8")
