"""Corrupt, missing or shared state is detected, reported and repairable (issue 14, items 4,
6 and 7)."""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from caap import Agent
from caap._doctor import diagnose
from caap.agent import StoreMismatchWarning
from caap.cli import main
from caap.conflict_graph.extractor import Extraction, OfflineExtractor
from caap.conflict_graph.store import GraphStore, StoreCorruptError
from caap.models import EdgeKind
from tests.scenarios import DRINKING, MEDICATION


class CountingExtractor:
    """The offline extractor, counting how many texts it parses."""

    def __init__(self) -> None:
        self.inner = OfflineExtractor()
        self.calls = 0

    def extract(self, text: str, *, subject: set[str] | None = None) -> Extraction:
        self.calls += 1
        return self.inner.extract(text, subject=subject)


def _fill(path: Path, embedder: Any) -> list[str]:
    with Agent(path, embedder=embedder) as a:
        return [m.id for m in a.remember_many(DRINKING + MEDICATION, "u")]


def _snapshot(path: Path) -> dict[str, str]:
    # SQLite's reader sidecars (-wal, -shm) may appear where the directory allows it; the
    # data files themselves must not change.
    return {
        str(p.relative_to(path)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def test_cold_start_does_not_parse_stored_texts_again(tmp_path: Path, embedder: Any) -> None:
    ids = _fill(tmp_path / "d", embedder)
    counting = CountingExtractor()
    with Agent(tmp_path / "d", embedder=embedder, extractor=counting) as a:
        assert [m.id for m in a.memories("u")] == ids
        graph = a.graph("u")
        assert counting.calls == 0  # facets come from the store
        fresh = OfflineExtractor().extract(DRINKING[1], subject=set(graph.subject))
        assert graph.extraction(ids[1]).context == fresh.context
        a.remember("Ethan now avoids beer on weeknights.", "u")
        assert counting.calls == 1  # only the new text


def test_garbage_store_is_a_clear_error(tmp_path: Path, embedder: Any, capsys: Any) -> None:
    _fill(tmp_path / "d", embedder)
    (tmp_path / "d" / "graph.sqlite").write_bytes(b"this is not a database" * 100)
    for name in ("graph.sqlite-wal", "graph.sqlite-shm"):
        (tmp_path / "d" / name).unlink(missing_ok=True)
    with pytest.raises(StoreCorruptError, match="caap doctor"):
        Agent(tmp_path / "d", embedder=embedder)
    code = main(["ask", "Can I drink tonight?", "--user", "u", "--data", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert code == 2 and "caap doctor" in err and "Traceback" not in err


def test_a_sqlite_file_that_is_not_ours_is_a_clear_error(tmp_path: Path) -> None:
    import sqlite3

    db = sqlite3.connect(tmp_path / "graph.sqlite")
    db.execute("CREATE TABLE other (x)")
    db.commit()
    db.close()
    with pytest.raises(StoreCorruptError, match="not a caap store"):
        GraphStore(tmp_path / "graph.sqlite")


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage"])
def test_lost_store_is_reported_then_rebuilt_by_doctor(
    tmp_path: Path, embedder: Any, damage: str, capsys: Any
) -> None:
    data = tmp_path / "d"
    ids = _fill(data, embedder)
    store = data / "graph.sqlite"
    for side in ("graph.sqlite-wal", "graph.sqlite-shm"):
        (data / side).unlink(missing_ok=True)
    if damage == "delete":
        store.unlink()
    elif damage == "truncate":
        store.write_bytes(b"")
    else:
        store.write_bytes(os.urandom(5000))
    # Never a silent "nothing on record".
    code = main(["ask", "Should I have a few drinks?", "--user", "u", "--data", str(data)])
    out = capsys.readouterr()
    assert code == 2 and "caap doctor" in out.err and "nothing on record" not in out.out
    report = diagnose(data, embedder=embedder)
    assert not report.ok and report.findings
    fixed = diagnose(data, repair=True, embedder=embedder)
    # Rebuilt whole, or (when the failed command left a fresh empty store) restored into it.
    assert fixed.ok and any("rebuilt" in a or "restored" in a for a in fixed.actions)
    assert fixed.unrecoverable  # says what could not come back
    with Agent(data, embedder=embedder) as a:
        assert sorted(m.id for m in a.memories("u")) == sorted(ids)
        assert a.conflicts("u")  # edges derived again
    assert diagnose(data, embedder=embedder).ok


def test_lost_index_is_rebuilt_from_the_store(tmp_path: Path, embedder: Any) -> None:
    import shutil

    data = tmp_path / "d"
    ids = _fill(data, embedder)
    shutil.rmtree(data / "vectors")
    # chromadb caches an open store per path in the process; a new process would not have it.
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    report = diagnose(data, embedder=embedder)
    assert not report.ok and any("not in the index" in f for f in report.findings)
    assert diagnose(data, repair=True, embedder=embedder).ok
    with Agent(data, embedder=embedder) as a:
        assert sorted(m.id for m in a.backend.list("u")) == sorted(ids)
        # Rebuilt with the stored vectors, the ones the agent indexes: each memory's value
        # finds it as itself.
        g = a.graph("u")
        for i in ids:
            hits = a.backend.search(g.extraction(i).value, "u", k=len(ids))
            assert any(h.memory.id == i and h.score > 0.99 for h in hits)


def test_index_entries_the_store_lacks_are_reported(tmp_path: Path, embedder: Any) -> None:
    data = tmp_path / "d"
    ids = _fill(data, embedder)
    with GraphStore(data / "graph.sqlite") as s, s.transaction() as db:
        s.delete_memory("u", ids[0], db=db)
    with Agent(data, embedder=embedder) as a, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a.memories("u")
    assert any(issubclass(w.category, StoreMismatchWarning) for w in caught)
    report = diagnose(data, embedder=embedder)
    assert not report.ok and any("in the index but not in the store" in f for f in report.findings)
    assert diagnose(data, repair=True, embedder=embedder).ok
    with Agent(data, embedder=embedder) as a:
        assert ids[0] in {m.id for m in a.memories("u")}  # restored, not dropped


def test_read_only_agent_writes_nothing(tmp_path: Path, embedder: Any) -> None:
    data = tmp_path / "d"
    _fill(data, embedder)
    before = _snapshot(data)
    with Agent(data, embedder=embedder, read_only=True) as a:
        assert a.respond("Should I have a few drinks tonight?", "u").text
        assert a.conflicts("u")
        with pytest.raises(PermissionError, match="read_only"):
            a.remember("x", "u")
        with pytest.raises(PermissionError, match="read_only"):
            a.forget("x", "u")
    assert _snapshot(data) == before
    with pytest.raises(FileNotFoundError):
        Agent(tmp_path / "missing", embedder=embedder, read_only=True)


def test_cli_read_commands_on_an_unwritable_dir(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    data = tmp_path / "d"
    _fill(data, embedder)
    before = _snapshot(data)
    # Tests run as root, for whom every file is writable: pretend the directory is not.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and real_access(p, mode))
    assert main(["conflicts", "--user", "u", "--data", str(data)]) == 0
    assert main(["ask", "Should I have a few drinks?", "--user", "u", "--data", str(data)]) == 0
    assert "action:" in capsys.readouterr().out
    assert _snapshot(data) == before


def test_two_agents_on_one_store_link_each_others_memories(tmp_path: Path, embedder: Any) -> None:
    data = tmp_path / "d"
    a = Agent(data, embedder=embedder)
    b = Agent(data, embedder=embedder)
    try:
        a.memories("u")
        b.memories("u")  # both have loaded (empty) graphs
        first = a.remember(MEDICATION[0], "u")
        second = b.remember(MEDICATION[1], "u")  # b must see a's memory and link to it
        edges = b.graph("u").edges() if hasattr(b.graph("u"), "edges") else []
        stored = b.store.edges("u")
        linked = [
            e
            for e in stored
            if {e.source_id, e.target_id} == {first.id, second.id}
            and e.kind is not EdgeKind.CORROBORATES
        ]
        assert linked, (edges, stored)
        # ...and a sees b's memory on its next read.
        assert {m.id for m in a.memories("u")} == {first.id, second.id}
    finally:
        a.close()
        b.close()
