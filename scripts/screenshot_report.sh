#!/usr/bin/env bash
# Render a TANGLE report to HTML and screenshot it in headless Chromium.
#
# Usage: scripts/screenshot_report.sh [OUT_DIR] [REPORT_JSON]
#   OUT_DIR      where report.html and report.png go (default: a new temporary directory)
#   REPORT_JSON  an existing report.json to render; without it a small sample report is built
#                from the shipped dataset (baselines + the offline structural judge).
# Environment: PYTHON (default /work/venv/bin/python, else python3), MIN_PNG_BYTES (default
# 60000), WINDOW (default 1280,2400).
#
# Exits non-zero when the screenshot is missing, is not a PNG of the window size, or is so
# small that the page must have rendered blank.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$(mktemp -d)}"
report_json="${2:-}"
window="${WINDOW:-1280,2400}"
min_bytes="${MIN_PNG_BYTES:-60000}"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x /work/venv/bin/python ]]; then python=/work/venv/bin/python; else python=python3; fi
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
html="$out/report.html"
png="$out/report.png"

# 1. Render.
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$python" - "$html" "$report_json" <<'PY'
import sys
from pathlib import Path

from caap.benchmark.html import render_html
from caap.benchmark.report import read_report

target, source = Path(sys.argv[1]), sys.argv[2]
if source:
    report = read_report(source)
else:
    # A small but complete sample: every conflict type, several actions, D6, and the pipeline
    # sections (observability levels here are illustrative, derived from the instance index).
    from caap.benchmark.base import JudgeInput
    from caap.benchmark.dataset import load_dataset
    from caap.benchmark.judges import StructuralJudge
    from caap.benchmark.registry import ComponentSpec, get_policy
    from caap.benchmark.report import InstanceResult, ObservabilityResult, Report, ScoreRow
    from caap.models import Memory

    judge = StructuralJudge()
    policies = ["lexical", "always_conditionalize", "source_priority", "always_ask"]
    levels = ["FULL", "PARTIAL", "FULL", "NONE"]
    rows = []
    for i, inst in enumerate(load_dataset()[:16]):
        policy = get_policy(policies[i % len(policies)], relevance="lexical")
        memories = [Memory(id=f"mem-{k + 1:02d}", user_id="u", text=m.text)
                    for k, m in enumerate(inst.memories)]
        shown = {f"mem-{k + 1:02d}": m.id for k, m in enumerate(inst.memories)}
        response = policy.respond(memories, inst.query)
        s = judge.score(JudgeInput(instance=inst, response=response, shown_ids=shown))
        level = levels[i % 4]
        rows.append(InstanceResult(
            id=inst.id, conflict_type=inst.conflict_type, high_risk=inst.high_risk,
            domain=inst.domain, action=response.decision.action.value,
            scores=ScoreRow(d1=s.d1, d2=s.d2, d3=s.d3, d4=s.d4, d5=s.d5, total=s.total),
            d6=s.d6, response=response.text, decision=response.decision,
            observability=ObservabilityResult(
                level=level, level_without_graph="NONE" if level != "FULL" else "PARTIAL",
                core_total=len(inst.core_ids)),
            judge_rationale=s.rationale,
        ))
    report = Report(track="pipeline", dataset="tangle (screenshot sample)",
                    policy=ComponentSpec(name="mixed-baselines", args={"relevance": "lexical"}),
                    judge=ComponentSpec(name="structural"),
                    backend=ComponentSpec(name="sample"), graph_expansion=True, instances=rows)
target.write_text(render_html(report), encoding="utf-8")
print(f"wrote {target}")
PY

# 2. Chromium (Debian package), installed on demand when we may.
if ! command -v chromium >/dev/null 2>&1; then
  if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is not installed (apt-get install -y chromium)" >&2
    exit 2
  fi
fi

# 3. Screenshot.
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
rm -f "$png"
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --screenshot="$png" \
  --window-size="$window" "file://$html" >"$out/chromium.log" 2>&1 || {
  echo "chromium failed; see $out/chromium.log" >&2
  tail -n 20 "$out/chromium.log" >&2
  exit 1
}

# 4. Check the PNG without PIL: signature, IHDR size, and a byte-size floor.
[[ -s "$png" ]] || { echo "no screenshot at $png" >&2; exit 1; }
sig="$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')"
[[ "$sig" == "89504e470d0a1a0a" ]] || { echo "$png is not a PNG ($sig)" >&2; exit 1; }
w=$((16#$(dd if="$png" bs=1 skip=16 count=4 2>/dev/null | od -An -tx1 | tr -d ' \n')))
h=$((16#$(dd if="$png" bs=1 skip=20 count=4 2>/dev/null | od -An -tx1 | tr -d ' \n')))
bytes=$(wc -c <"$png")
echo "screenshot $png: ${w}x${h}, ${bytes} bytes"
[[ "${w},${h}" == "$window" ]] || { echo "unexpected size ${w}x${h} (want $window)" >&2; exit 1; }
(( bytes > min_bytes )) || { echo "screenshot too small (${bytes} <= ${min_bytes} bytes)" >&2; exit 1; }
