#!/usr/bin/env bash
# The development sets a keep rule (benchmark/PREREG.md) is checked on, for one checkout: stale
# probes on stale3, dev2, stale4, stale2, train, dev, extra, dev3, dev4 and dev5, and the TANGLE
# oracle track (structural judge, seed 0) on dev, extra, guard, dev2, dev3 and dev4, with the
# `learned` layer. Two lanes run side by side (about 14 minutes on 2 cores). Compare two
# checkouts' outputs with benchmark/compare_runs.py. The frozen test splits (test, test2) and
# guard2 are never run here.
#
# Usage: benchmark/dev_sets.sh OUT_DIR [CHECKOUT]
#   CHECKOUT  the source tree to measure (default: this one); it is put first on PYTHONPATH,
#             so a worktree of a candidate is measured with the installed dependencies
# Environment:
#   PYTHON    the interpreter with caap's dependencies (default: python3)
#   RELATIONS the relation layer (default: learned)
# Writes OUT_DIR/stale_SET/stale_report.json and OUT_DIR/tangle_SET/report.json, and a log per
# run beside them; prints one line per finished run.
set -euo pipefail
out=${1:?usage: benchmark/dev_sets.sh OUT_DIR [CHECKOUT]}
here=$(cd "$(dirname "$0")/.." && pwd)
tree=$(cd "${2:-$here}" && pwd)
python=${PYTHON:-python3}
layer=${RELATIONS:-learned}
blind=$here/caap/benchmark/data/blind
mkdir -p "$out"
out=$(cd "$out" && pwd)
# `python -m` puts the working directory first on sys.path: run from the checkout measured, so
# its caap is the one imported (from another checkout, that one's caap would shadow it).
cd "$tree"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$tree${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

stale() {
  for s in "$@"; do
    "$python" -m caap.cli tangle probe-stale --policy caap --relations "$layer" \
      --dataset "$blind/$s/stale" --out "$out/stale_$s" --quiet >"$out/stale_$s.log" 2>&1 \
      || { echo "stale $s: failed, see its log" >&2; return 1; }
    echo "stale $s: done"
  done
}
tangle() {
  for s in "$@"; do
    "$python" -m caap.cli tangle run --track oracle --policy caap --relations "$layer" \
      --judge structural --seed 0 --dataset "$blind/$s/tangle" --out "$out/tangle_$s" \
      --quiet >"$out/tangle_$s.log" 2>&1 \
      || { echo "tangle $s: failed, see its log" >&2; return 1; }
    echo "tangle $s: done"
  done
}
# Two lanes of about equal length. (errexit does not reach into functions run in a list, so
# each run stops its lane itself on failure.)
(stale stale3 dev2 stale4 dev extra dev4 && tangle dev extra dev3) &
lane=$!
status=0
{ stale stale2 train dev3 dev5 && tangle guard dev2 dev4; } || status=1
wait "$lane" || status=1
exit "$status"
