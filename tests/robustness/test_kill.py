"""A writer killed with SIGKILL loses no acknowledged write and leaves a store that opens
(issue 14: the crash test of the robustness suite)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from caap import Agent

WRITER = textwrap.dedent(
    """
    import sys
    from caap import Agent
    agent = Agent(sys.argv[1])
    i = 0
    while True:
        m = agent.remember_many(
            [f"Note {i}: Ethan walked {i % 7} km today.", f"Note {i}b: Ethan slept badly."], "u"
        )
        for x in m:
            print(x.id, flush=True)  # acknowledged: remember_many returned
        i += 1
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_sigkill_during_writes_loses_no_acknowledged_memory(tmp_path: Path, embedder: Any) -> None:
    data = tmp_path / "d"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    acked: list[str] = []
    try:
        assert proc.stdout is not None
        while len(acked) < 12:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(line.strip())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert len(acked) >= 12, "the writer did not start"
    with Agent(data, embedder=embedder) as a:
        stored = {m.id for m in a.memories("u")}
        indexed = {m.id for m in a.backend.list("u")}  # the index is repaired on open
    assert set(acked) <= stored
    assert set(acked) <= indexed
