"""``caap bench`` on tiny sizes: the report has every phase and peer it claims to have."""

from __future__ import annotations

from pathlib import Path

import pytest

from caap.benchmark.perf import BenchConfig, corpus, queries, run_bench, write_report
from caap.cli import main


def test_corpus_is_distinct_and_starts_with_the_shipped_texts() -> None:
    texts = corpus(3000)
    assert len(texts) == 3000 and len(set(texts)) == 3000
    assert corpus(3000) == texts  # seeded
    assert len(queries(120)) == 120


def test_bench_reports_phases_peers_and_graph_layer(tmp_path: Path) -> None:
    report = run_bench(
        BenchConfig(
            sizes=(40,), graph_sizes=(60,), queries=3, batch=16, graph_writes=4,
            mem0=False, progress=False,
        )
    )  # fmt: skip
    (row,) = report["end_to_end"]
    assert row["n"] == 40
    agent, raw = row["ingest_agent"], row["ingest_raw"]
    assert agent["memories_per_s"] > 0 and raw["memories_per_s"] > 0
    # The agent's ingest time is split into the phases the SDK marks.
    assert {"embed", "extract", "graph", "sqlite", "vector_store"} <= set(agent["phase_seconds"])
    assert set(raw["phase_seconds"]) >= {"embed", "vector_store"}
    assert "graph" not in raw["phase_seconds"]
    assert row["respond"]["n"] == 3 and "policy" in row["respond"]["mean_phase_ms"]
    assert row["respond"]["p50_ms"] <= row["respond"]["p95_ms"] <= row["respond"]["p99_ms"]
    assert "ingest_mem0" not in row
    (g,) = report["graph_layer"]
    assert g["n"] == 60 and g["write"]["n"] == 4 and g["answer"]["n"] == 3
    assert g["inverted_index"] is False
    # How memories spread over aspects: every memory is in one, the largest is a share of all.
    for sizes, n in ((row["aspects"], 40), (g["aspects"], 60 + 4)):
        assert 1 <= sizes["count"] <= n and 1 <= sizes["p99"] <= sizes["largest"] <= n
        assert sizes["largest_share"] == pytest.approx(sizes["largest"] / n)
    out = write_report(report, tmp_path / "b")
    md = (out / "bench.md").read_text()
    assert "| 40 |" in md and "| 60 |" in md
    page = (out / "bench.html").read_text()
    # Rendered like report.html: real tables and charts with visible titles, no Markdown box.
    assert "<svg" in page and "<table>" in page and "<pre>" not in page
    assert '<td class="num">40</td>' in page and "|---" not in page
    assert "<h2>Graph layer p95 (ms) by number of memories N</h2>" in page
    assert (out / "bench.json").read_text().startswith("{")


def test_bench_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    # Refused while parsing, before any model is loaded.
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--sizes", "0", "--graph-sizes", "--quiet"])
    assert exit_.value.code == 2
    assert "--sizes: expected a positive integer, got 0" in capsys.readouterr().err


def test_bench_compares_relation_layers_in_one_run(tmp_path: Path) -> None:
    report = run_bench(
        BenchConfig(
            sizes=(30,), graph_sizes=(), queries=2, batch=16, mem0=False, progress=False,
            relations=("rules", "learned"),
        )
    )  # fmt: skip
    rows = report["end_to_end"]
    assert [r["relations"] for r in rows] == ["rules", "learned"]
    for r in rows:  # each layer has its own raw peer from the same run
        assert r["ingest_agent"]["memories_per_s"] > 0 and r["ingest_ratio_agent_raw"] > 0
    md = (write_report(report, tmp_path / "b") / "bench.md").read_text()
    assert "| 30 (rules) |" in md and "| 30 (learned) |" in md


def test_bench_rejects_an_unknown_layer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--sizes", "5", "--graph-sizes", "--relations", "nope", "--quiet"]) == 2
    assert "relations must name layers" in capsys.readouterr().err


def test_bench_times_topic_upkeep_and_budgeted_recall_on_conversation_turns(
    tmp_path: Path,
) -> None:
    report = run_bench(
        BenchConfig(
            sizes=(48,), graph_sizes=(), queries=3, batch=16, mem0=False, progress=False,
            conversation=True, session_turns=6, budget=5,
        )
    )  # fmt: skip
    (row,) = report["conversation"]
    assert row["n"] == 48 and row["budget"] == 5
    ing = row["ingest"]
    # Turns go through topic formation, and its time is its own phase.
    assert ing["phase_seconds"].get("topics", 0.0) > 0
    assert ing["batch"]["n"] == 3 and ing["topics_ms_per_batch"]["max"] > 0
    assert row["recall_budget"]["n"] == 3 and row["search_plain"]["n"] == 3
    # 48 turns in 8 sessions of 6: topics group them, none is everything.
    assert 1 < row["aspects"]["count"] < 48
    md = (write_report(report, tmp_path / "b") / "bench.md").read_text()
    assert "| 48 (rules, B=5) |" in md
