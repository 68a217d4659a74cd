#!/usr/bin/env bash
# The price of a workflow: one order-conditioned recipe policy per (alignment weight λ, seed),
# evaluated on every workflow (reward and compliance), for λ = 10, 30, 100, 300 and two seeds.
# Tables are combined and plotted by experiments/price_of_workflow.py.
#   bash experiments/price_of_workflow.sh [OUT]        # ≈ 2 h on the 2-core machine
set -euo pipefail
OUT=${1:-runs/price}
export OMP_NUM_THREADS=1
for seed in 0 1; do
  for lam in 30 300 10 100; do
    .venv/bin/python -m wfrl exhaustive --protocol conditioned --ppo-preset recipe \
      --pretrain-episodes 30000 --eval-episodes 200 --alignment-lambda "$lam" --seed "$seed" \
      --out "$OUT/lam$lam/seed$seed" > "$OUT/lam$lam.seed$seed.log" 2>&1
  done
done
