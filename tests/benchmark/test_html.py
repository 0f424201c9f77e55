"""The HTML report page: self-contained, escaped, one chart per plot, and a real screenshot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from caap.benchmark.html import render_compare_html, render_html
from caap.benchmark.registry import ComponentSpec
from caap.benchmark.report import InstanceResult, ObservabilityResult, Report, ScoreRow
from caap.models import Action, Decision

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshot_report.sh"
EVIL = '<script>alert("x")</script> & <img src="https://evil.example/x.png">'

_EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)|"""
    r"""(?:url\(\s*["']?\s*(?:https?:)?//)|(?:@import)|(?:<link\b)|(?:<script\b)|(?:<iframe\b)""",
    re.IGNORECASE,
)


def result(
    i: int,
    ctype: str,
    action: str,
    dims: tuple[int, int, int, int, int],
    *,
    response: str = "If it's a morning run, have eggs; if evening, a shake.",
    d6: str | None = None,
    level: str | None = None,
    level_without: str | None = None,
    error: str | None = None,
) -> InstanceResult:
    obs = None
    if level is not None:
        obs = ObservabilityResult(level=level, level_without_graph=level_without, core_total=7)  # type: ignore[arg-type]
    return InstanceResult(
        id=f"p{i:02d}_{ctype.lower()}",
        conflict_type=ctype,
        high_risk=d6 is not None,
        action=action,
        scores=ScoreRow(
            d1=dims[0], d2=dims[1], d3=dims[2], d4=dims[3], d5=dims[4], total=sum(dims)
        ),
        d6=d6,  # type: ignore[arg-type]
        observability=obs,
        response=response,
        decision=Decision(action=Action(action)),
        judge_rationale={"d1": "references 3 of 7 core memories"},
        error=error,
    )


def oracle_report(**over: object) -> Report:
    rows = [
        result(1, "CPC", "conditionalize", (4, 3, 4, 4, 4)),
        result(2, "CPC", "commit", (1, 1, 1, 0, 4)),
        result(3, "BOC", "clarify", (4, 3, 4, 3, 4)),
        result(4, "BOC", "reversible_trial", (3, 2, 3, 2, 4)),
        result(5, "SCC", "verify", (4, 4, 4, 4, 4), d6="safe"),
        result(6, "SCC", "commit", (1, 1, 1, 0, 4), d6="unsafe", response=EVIL),
        result(7, "SCC", "conditionalize", (3, 2, 2, 1, 4), d6="partial"),
        result(8, "NONE", "commit", (4, 3, 4, 4, 4)),
        result(9, "BOC", "commit", (0, 0, 0, 0, 0), error="LLMTimeout: judge timed out"),
    ]
    fields: dict[str, object] = {
        "track": "oracle",
        "dataset": "tangle",
        "policy": ComponentSpec(name="caap", args={"backbone": "offline"}),
        "judge": ComponentSpec(name="structural"),
        "created_at": datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc),
        "caap_version": "0.1.0",
        "instances": rows,
    }
    fields.update(over)
    return Report.model_validate(fields)


def pipeline_report() -> Report:
    rows = [
        result(1, "CPC", "clarify", (4, 3, 4, 4, 4), level="FULL", level_without="PARTIAL"),
        result(2, "BOC", "clarify", (3, 2, 4, 3, 4), level="PARTIAL", level_without="NONE"),
        result(3, "SCC", "verify", (2, 2, 3, 2, 4), d6="safe", level="FULL", level_without="FULL"),
        result(4, "NONE", "commit", (4, 2, 4, 4, 4), level="NONE", level_without="NONE"),
    ]
    return Report(
        track="pipeline",
        dataset="tangle",
        policy=ComponentSpec(name="caap"),
        judge=ComponentSpec(name="llm", args={"model": "openai:gpt-4o-mini"}),
        backend=ComponentSpec(name="memory", args={"top_k": 10}),
        graph_expansion=True,
        instances=rows,
    )


def empty_report() -> Report:
    return Report(
        track="oracle",
        dataset="tangle",
        policy=ComponentSpec(name="direct"),
        judge=ComponentSpec(name="structural"),
    )


class _Checker(HTMLParser):
    """Collects tags and checks they nest (a broken table or svg would not)."""

    VOID = frozenset({"meta", "br", "img", "input", "hr", "link", "rect", "line", "path"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
            return
        self.stack.pop()


def parse(page: str) -> _Checker:
    c = _Checker()
    c.feed(page)
    c.close()
    assert not c.errors, c.errors[:3]
    assert not c.stack, f"unclosed: {c.stack}"
    return c


def test_oracle_page_is_self_contained_and_well_formed() -> None:
    page = render_html(oracle_report())
    assert page.startswith("<!doctype html>")
    assert not _EXTERNAL.search(page), _EXTERNAL.search(page)
    assert "http://" not in page.replace(EVIL, "")
    parse(page)


def test_one_svg_per_plot() -> None:
    tags = parse(render_html(oracle_report())).tags
    # profile, totals, action mix, D6 — no observability on the oracle track
    assert tags.count("svg") == 4
    ptags = parse(render_html(pipeline_report())).tags
    assert ptags.count("svg") == 5  # + observability


def test_response_with_script_is_escaped() -> None:
    page = render_html(oracle_report())
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "&lt;img src=&quot;https://evil.example/x.png&quot;&gt;" in page


def test_header_names_the_judge_behind_every_number() -> None:
    page = render_html(oracle_report())
    assert "Every number on this page was produced by the" in page
    assert "<code>structural</code>" in page and "proxy" in page
    for text in ("oracle", "tangle", "caap", "backbone", "2025-06-01T12:00:00+00:00", "1.0"):
        assert text in page
    llm = render_html(pipeline_report())
    assert "<code>llm:openai:gpt-4o-mini</code>" in llm and 'class="banner proxy"' not in llm


def test_instance_table_has_every_row_and_the_error() -> None:
    report = oracle_report()
    page = render_html(report)
    for r in report.instances:
        assert f"<code>{r.id}</code>" in page
    assert "error: LLMTimeout: judge timed out" in page
    assert "references 3 of 7 core memories" in page  # judge rationale


def test_pipeline_page_shows_observability_with_and_without_graph() -> None:
    page = render_html(pipeline_report())
    assert "Observability (pipeline)" in page
    assert "backend search only" in page and "with conflict graph" in page
    assert "FULL / PARTIAL" in page  # per-instance: with graph / without
    parse(page)


def test_empty_report_renders() -> None:
    page = render_html(empty_report(), title="Nothing yet")
    parse(page)
    assert "<h1>Nothing yet</h1>" in page and "no instances" in page
    assert "no data" in page
    assert not _EXTERNAL.search(page)


def test_title_is_escaped() -> None:
    page = render_html(empty_report(), title="<b>x</b>")
    assert "<h1>&lt;b&gt;x&lt;/b&gt;</h1>" in page


def test_compare_page_puts_runs_side_by_side() -> None:
    a = oracle_report(policy=ComponentSpec(name="recency"))
    b = oracle_report()
    page = render_compare_html([a, b])
    c = parse(page)
    assert c.tags.count("svg") == 2
    assert "recency" in page and "caap" in page
    assert f"{a.mean_total('CPC'):.2f}" in page and f"{b.mean_total():.2f}" in page
    assert not _EXTERNAL.search(page)
    assert "Different judges" not in page
    mixed = render_compare_html([a, pipeline_report()])
    assert "Different judges" in mixed
    parse(render_compare_html([]))


def test_compare_labels_are_unique() -> None:
    page = render_compare_html([oracle_report(), oracle_report()])
    assert "caap #2" in page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_screenshot_of_a_rendered_report(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    png = tmp_path / "report.png"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2400)
    assert len(data) > 60_000  # a blank or error page compresses to a few KB
