"""benchmark/request_turns.py: the rules alone against the rules with the request head."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._scripts import load_script


def test_both_readings_are_counted_per_style(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("benchmark/request_turns.py")
    rows = [
        {"text": "best app to split bills w roommates", "label": "asks", "style": "chatty"},
        {"text": "Can you give me a recipe for tonight?", "label": "asks", "style": "narrative"},
        {"text": "I started at the fintech place on Monday.", "label": "states", "style": "dated"},
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # The rules keep the chat question (no mark, no inversion) and drop the other.
    assert mod.errors(rows, ["best app to split bills w roommates", "", "I started"]) == {
        "all": (0, 1),
        "chatty": (0, 1),
        "narrative": (0, 0),
        "dated": (0, 0),
    }
    assert mod.errors(rows[2:], [""]) == {"all": (1, 0), "dated": (1, 0)}
    assert mod.main(["--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 turns: 1 states, 2 asks"
    assert out[1].startswith("rules: states read as stating nothing 0, asks read as stating 1")
    assert out[2].startswith("rules + head: ")
    assert mod.main(["--data", str(tmp_path / "none")]) == 2
