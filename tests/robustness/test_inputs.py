"""Bad input is rejected before any work, with an error naming the field (issue 14, items 4-5)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from caap import DEFAULT_MAX_TEXT_BYTES, Agent, split_text


@pytest.fixture
def agent(tmp_path: Path, embedder: Any) -> Agent:
    return Agent(tmp_path / "data", embedder=embedder)


def _nothing_stored(agent: Agent) -> None:
    assert agent.memories("u") == []
    assert agent.backend.count("u") == 0


def test_a_str_is_not_many_memories(agent: Agent) -> None:
    with pytest.raises(TypeError, match=r"items.*single str"):
        agent.remember_many("abc", "u")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"items.*single mapping"):
        agent.remember_many({"text": "a"}, "u")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="items"):
        agent.remember_many(42, "u")  # type: ignore[arg-type]
    _nothing_stored(agent)


@pytest.mark.parametrize(
    ("metadata", "error", "field"),
    [
        ({"tags": {"a", "b"}}, TypeError, r"metadata\['tags'\] is a set"),
        ({"x": math.nan}, ValueError, r"metadata\['x'\] is nan"),
        ({"x": [1, math.inf]}, ValueError, r"metadata\['x'\]\[1\] is inf"),
        ({"x": (1, 2)}, TypeError, r"metadata\['x'\] is a tuple"),
        ({"x": b"raw"}, TypeError, r"metadata\['x'\] is a bytes"),
        ({1: "a"}, TypeError, "metadata has a int key"),
        ({"x": object()}, TypeError, r"metadata\['x'\] is a object"),
        ({"x": "\ud800"}, ValueError, r"metadata\['x'\] is not valid Unicode"),
        ([], TypeError, "metadata must be a mapping, got list"),
        ("abc", TypeError, "metadata must be a mapping, got str"),
    ],
)
def test_metadata_that_json_would_change_is_rejected(
    agent: Agent, metadata: Any, error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        agent.remember("Ethan likes tea.", "u", metadata=metadata)
    _nothing_stored(agent)


def test_good_metadata_round_trips_exactly(tmp_path: Path, embedder: Any) -> None:
    meta = {"a": [1, 2.5, None, True, {"b": "c"}], "d": "é"}
    with Agent(tmp_path / "d", embedder=embedder) as a:
        m = a.remember("Ethan likes tea.", "u", metadata=meta, provenance={"session": "s1"})
    with Agent(tmp_path / "d", embedder=embedder) as a:
        back = a.memories("u")[0]
    assert back.id == m.id and back.metadata == meta and back.provenance == {"session": "s1"}


@pytest.mark.parametrize(
    ("provenance", "field"),
    [
        ("abc", "provenance must be a mapping of str to str, got str"),
        ({"session": 3}, r"provenance\['session'\] must be a str"),
        ({3: "x"}, "provenance keys must be str"),
        ({"s": "\udcff"}, r"provenance\['s'\] is not valid Unicode"),
    ],
)
def test_bad_provenance_names_the_entry(agent: Agent, provenance: Any, field: str) -> None:
    with pytest.raises((TypeError, ValueError), match=field):
        agent.remember("Ethan likes tea.", "u", provenance=provenance)
    _nothing_stored(agent)


def test_text_limits_and_invalid_unicode(agent: Agent) -> None:
    assert DEFAULT_MAX_TEXT_BYTES == 32 * 1024
    with pytest.raises(ValueError, match=r"text is 32769 bytes.*over the limit of 32768"):
        agent.remember("a" * (DEFAULT_MAX_TEXT_BYTES + 1), "u")
    with pytest.raises(ValueError, match=r"source is .* bytes"):
        agent.remember("Ethan likes tea.", "u", source="x" * 40_000)
    with pytest.raises(ValueError, match="text is not valid Unicode"):
        agent.remember("Ethan \ud83d likes tea.", "u")
    with pytest.raises(ValueError, match="user_id is not valid Unicode"):
        agent.remember("Ethan likes tea.", "\ud800")
    with pytest.raises(ValueError, match=r"query is .* bytes"):
        agent.recall("q" * 40_000, "u")
    _nothing_stored(agent)
    # Exactly at the limit is fine; nothing is truncated.
    m = agent.remember("é" * (DEFAULT_MAX_TEXT_BYTES // 2), "u")
    assert len(m.text) == DEFAULT_MAX_TEXT_BYTES // 2


def test_limit_is_configurable(tmp_path: Path, embedder: Any) -> None:
    with (
        Agent(tmp_path / "d", embedder=embedder, max_text_bytes=10) as a,
        pytest.raises(ValueError, match="over the limit of 10"),
    ):
        a.remember("Ethan likes tea.", "u")
    with pytest.raises(ValueError, match="max_text_bytes"):
        Agent(tmp_path / "e", embedder=embedder, max_text_bytes=0)


def test_split_text_on_request_keeps_every_word() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(2000))
    pieces = split_text(text, max_bytes=1000)
    assert all(len(p.encode()) <= 1000 for p in pieces)
    assert " ".join(pieces).split() == text.split()
    assert split_text("x" * 25, max_bytes=10) == ["x" * 10, "x" * 10, "x" * 5]


@pytest.mark.parametrize("bad", [None, 123, 1.5, b"id", ["id"]])
def test_forget_rejects_a_non_string_id(agent: Agent, bad: Any) -> None:
    with pytest.raises(TypeError, match="memory_id must be a str"):
        agent.forget(bad, "u")
    with pytest.raises(ValueError, match="memory_id must be a non-empty"):
        agent.forget("  ", "u")
    assert agent.forget("no-such-id", "u") is False
