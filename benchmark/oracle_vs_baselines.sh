#!/usr/bin/env bash
# Oracle track, structural judge: CAAP against every fixed baseline on the shipped dataset.
# Usage: benchmark/oracle_vs_baselines.sh [OUT_DIR]   (about 12.5 minutes on 2 cores)
set -euo pipefail
out=${1:-runs/oracle}
policies=(caap direct recency majority source_priority always_ask always_conditionalize lexical)
for p in "${policies[@]}"; do
  caap tangle run --track oracle --policy "$p" --judge structural --seed 0 --out "$out/$p" --quiet
done
caap tangle compare "${policies[@]/#/$out/}"
