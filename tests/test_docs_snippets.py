"""Every ```python block in README.md and docs/ runs, offline, as a user would paste it.

The blocks of one page run in order in one fresh interpreter (a later block may use a name an
earlier one defined, as a reader would), in an empty temporary folder, with the network closed
except for 127.0.0.1. A block that cannot run on its own is marked on the line before its
fence with ``<!-- skip: reason -->``; the reason must say what it needs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_SKIP = re.compile(r"<!--\s*skip:(.*?)-->")


@dataclass(frozen=True)
class Block:
    """One fenced python block of a page."""

    page: str
    line: int
    code: str
    skip: str | None


def blocks(path: Path) -> list[Block]:
    """The page's python blocks, with the skip reason written just above each, if any."""
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    out = []
    for m in _FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 2)[-2:]
        reason = None
        for prev in before:
            hit = _SKIP.search(prev)
            if hit:
                reason = hit.group(1).strip()
        out.append(Block(rel, line, m.group(1), reason))
    return out


# Runs in the child: close the network to everything but loopback, then exec each block in one
# namespace, compiled under "page:line" so a traceback names the block.
_RUNNER = r"""
import json, socket, sys

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_connect = socket.socket.connect

def _guarded(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
        raise OSError(f"docs snippets run offline: connection to {address[0]!r} refused")
    return _connect(self, address)

socket.socket.connect = _guarded
ns = {"__name__": "__main__"}
for block in json.load(open(sys.argv[1], encoding="utf-8")):
    print(f"--- {block['page']}:{block['line']}", flush=True)
    exec(compile(block["code"], f"{block['page']}:{block['line']}", "exec"), ns)
"""


def _pages_with_code() -> list[Path]:
    return [p for p in PAGES if blocks(p)]


def test_pages_have_code_blocks() -> None:
    # The extractor finds the README's quick start (a broken regex would make every test vacuous).
    readme = blocks(ROOT / "README.md")
    assert readme and "Agent(" in readme[0].code
    assert len(_pages_with_code()) >= 8


def test_skips_are_few_and_give_reasons() -> None:
    every = [b for p in PAGES for b in blocks(p)]
    skipped = [b for b in every if b.skip is not None]
    assert all(b.skip for b in skipped), [f"{b.page}:{b.line}" for b in skipped if not b.skip]
    # Sparingly: most of what the docs show must really run.
    assert len(skipped) * 3 < len(every), [f"{b.page}:{b.line}" for b in skipped]


@pytest.mark.parametrize("page", _pages_with_code(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_snippets_run(page: Path, tmp_path: Path) -> None:
    runnable = [b for b in blocks(page) if b.skip is None]
    if not runnable:
        pytest.skip("every block on this page needs a service: " + blocks(page)[0].skip)
    work = tmp_path / "work"
    work.mkdir()
    payload = tmp_path / "blocks.json"
    payload.write_text(json.dumps([b.__dict__ for b in runnable]), encoding="utf-8")
    runner = tmp_path / "run_snippets.py"
    runner.write_text(_RUNNER, encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "CAAP_SERVER", "CAAP_API_KEY"))
    }
    env.update(
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MEM0_TELEMETRY="False",
        ANONYMIZED_TELEMETRY="False",
        HOME=str(tmp_path),  # Mem0 and friends write under ~; keep it in the temp folder
    )
    proc = subprocess.run(
        [sys.executable, str(runner), str(payload)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:] + "\n" + proc.stderr[-6000:]).strip()
