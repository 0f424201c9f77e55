#!/usr/bin/env bash
# The blind corpus (caap/benchmark/data/blind/SPLIT): CAAP with each relation layer against the
# fixed baselines, oracle track, structural judge; and the stale-state probes per layer. Every
# command prints aggregate numbers only (per type, per style, high-risk); per-instance results
# stay in the report files under OUT_DIR. Do not open the test split's data or its reports'
# instance rows: look at test failures only by class (see shared EVALUATION.md).
#
# Usage: benchmark/blind_eval.sh OUT_DIR [SPLIT]     SPLIT: test (default), or any split with a
#        tangle/ folder (dev, dev2, extra, train2, ...; stale/ is probed where it exists)
# Environment:
#   RELATIONS  relation layers to compare (default "rules learned"; empty: none; "llm" needs a model, see
#              docs/llm.md)
#   BASELINES  fixed baselines to run (default: all of them; empty: none)
#   BLIND_DIR  the corpus root (default: the one shipped in the package)
#   CAAP       the caap command (default: caap)
# Writes OUT_DIR/oracle/<run>/report.{json,html}, OUT_DIR/stale/caap-<layer>/stale_report.json,
# OUT_DIR/compare.txt (every run side by side) and OUT_DIR/summary.md (one markdown table: the
# layers next to the best fixed baselines by total and by acceptable-action share), over every
# run under OUT_DIR (so RELATIONS=learned BASELINES= adds a layer to an earlier run's tables).
# About 25 minutes on 2 cores for the test split with two layers.
set -euo pipefail
out=${1:?usage: benchmark/blind_eval.sh OUT_DIR [SPLIT]}
split=${2:-test}
relations=${RELATIONS-rules learned}
baselines=${BASELINES-direct recency majority source_priority always_ask always_conditionalize lexical}
caap=${CAAP:-caap}
if [[ -z ${BLIND_DIR:-} ]]; then
  BLIND_DIR=$(python3 -c 'import caap.benchmark, pathlib; print(pathlib.Path(caap.benchmark.__file__).parent / "data" / "blind")' 2>/dev/null \
    || echo caap/benchmark/data/blind)
fi
data=$BLIND_DIR/$split
[[ -d $data/tangle ]] || { echo "blind_eval: no $data/tangle" >&2; exit 2; }
mkdir -p "$out/oracle" "$out/stale"

runs=()
stale=()
for layer in $relations; do
  echo "== caap, relations=$layer: oracle track on $split"
  $caap tangle run --track oracle --policy caap --relations "$layer" --judge structural \
    --seed 0 --dataset "$data/tangle" --out "$out/oracle/caap-$layer" --quiet
  runs+=("$out/oracle/caap-$layer")
  if [[ -d $data/stale ]]; then
    echo "== caap, relations=$layer: stale probes on $split"
    $caap tangle probe-stale --policy caap --relations "$layer" --dataset "$data/stale" \
      --out "$out/stale/caap-$layer" --quiet
    stale+=(--stale "$out/stale/caap-$layer")
  fi
done
for p in $baselines; do
  echo "== baseline $p: oracle track on $split"
  $caap tangle run --track oracle --policy "$p" --judge structural --seed 0 \
    --dataset "$data/tangle" --out "$out/oracle/$p" --quiet
  runs+=("$out/oracle/$p")
done
# Tables over every run under OUT_DIR, so layers can be added in later invocations.
runs=()
stale=()
for d in "$out"/oracle/caap-* "$out"/oracle/*; do
  [[ -f $d/report.json && ! " ${runs[*]} " =~ " $d " ]] && runs+=("$d")
done
for d in "$out"/stale/*; do
  [[ -f $d/stale_report.json ]] && stale+=(--stale "$d")
done
$caap tangle compare "${runs[@]}" | tee "$out/compare.txt"
echo
$caap tangle summary "${runs[@]}" "${stale[@]}" --out "$out/summary.md"
