"""The docs site (mkdocs-material, ``mkdocs.yml``) builds with ``--strict``: no broken link,
no page left out of the nav, no unknown anchor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _nav_pages(items: list[object]) -> set[str]:
    pages: set[str] = set()
    for item in items:
        if isinstance(item, str):
            pages.add(item)
        elif isinstance(item, dict):
            for value in item.values():
                pages |= _nav_pages(value) if isinstance(value, list) else {str(value)}
    return pages


def test_nav_lists_every_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert _nav_pages(config["nav"]) == on_disk


def test_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    page = (tmp_path / "site" / "concepts" / "index.html").read_text(encoding="utf-8")
    assert "<table>" in page  # markdown tables rendered, not left as text
