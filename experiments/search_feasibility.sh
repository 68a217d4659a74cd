#!/usr/bin/env bash
# Real simulator, B_line: default searches (python -m wfrl train, default settings) for seeds
# 0..9, each stopped after 20 visits (the episode budget raised so that it does not bind), then
# scored against the 10-run ground truth's feasible set by experiments/search_feasibility.py.
#   bash experiments/search_feasibility.sh [OUT] [SEEDS...]      # ≈ 12 min per seed on 2 cores
# EXTRA='--epochs 4' adds flags to every search (a variant of the default learner).
set -euo pipefail
OUT=${1:-runs/feasibility}; shift || true
SEEDS=${*:-0 1 2 3 4 5 6 7 8 9}
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=1
mkdir -p "$OUT"
for seed in $SEEDS; do
  [ -f "$OUT/seed$seed/summary.json" ] && continue
  $PY -m wfrl train --collector sequential --seed "$seed" --max-evaluations 20 \
    --total-episodes 1000000 --out "$OUT/seed$seed" --force ${EXTRA:-} > "$OUT/seed$seed.log" 2>&1
done
