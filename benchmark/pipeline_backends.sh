#!/usr/bin/env bash
# Pipeline track, structural judge: each backend raw (--no-graph) and with the conflict graph.
# Every run's report also holds the raw and equal-budget observability of its own banks.
# Usage: benchmark/pipeline_backends.sh [OUT_DIR] [BACKEND ...]   (default: builtin mem0)
# Time on 2 shared cores: builtin 5-6 minutes a run, mem0 about 35 minutes a run (Mem0
# embeds each memory on its own).
set -euo pipefail
out=${1:-runs/pipeline}
shift || true
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(builtin mem0)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MEM0_TELEMETRY=False
dirs=()
for b in "${backends[@]}"; do
  caap tangle run --track pipeline --policy caap --backend "$b" --out "$out/$b" --quiet
  caap tangle run --track pipeline --policy caap --backend "$b" --no-graph \
    --out "$out/$b-nograph" --quiet
  dirs+=("$out/$b" "$out/$b-nograph")
done
caap tangle compare "${dirs[@]}"
