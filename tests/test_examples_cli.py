"""The interactive example ends cleanly on Ctrl-D at its prompt (a real terminal, via a pty)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _readable(fd: int, timeout: float) -> bool:
    # poll, not select: after a long test session the pty's descriptor can be above
    # select()'s FD_SETSIZE (1024).
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_personal_assistant_exits_cleanly_on_ctrl_d(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "personal_assistant.py"), "--data",
         str(tmp_path / "d")],
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 600
    try:
        # Wait for the prompt (the model loads first), then send end-of-input.
        while b"> " not in seen and time.monotonic() < deadline and proc.poll() is None:
            if _readable(master, 1.0):
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        assert b"> " in seen, seen.decode(errors="replace")
        os.write(master, b"\x04")
        rc = proc.wait(timeout=120)
        while True:
            if not _readable(master, 0.2):
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert rc == 0, seen.decode(errors="replace")
    assert b"Traceback" not in seen and b"EOFError" not in seen
