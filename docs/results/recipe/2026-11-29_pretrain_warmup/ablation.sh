#!/bin/bash
# The search's base (60,000 pretraining episodes, the default search's settings) per arm and seed:
#   default: the search as it was before --pretrain-warmup (no warm-up)
#   no_overlap, entropy_0.02, lr_final_0.3, lambda_0, lambda_10: one setting changed from that
#   warmup: the first 20,000 episodes without the compliance reward (today's default)
# usage: bash ablation.sh OUT   (then: python eval_bases.py OUT OUT/bases.json;
#                                      python table.py OUT OUT/bases.json > ablation.txt)
set -e
OUT=${1:?usage: bash ablation.sh OUT}
export OMP_NUM_THREADS=1
run() {  # arm seed flags...
  local arm=$1 seed=$2; shift 2
  python -m wfrl train --total-episodes 61000 --seed "$seed" "$@" \
      --out "$OUT/$arm/seed$seed" --force > "$OUT/$arm.seed$seed.log" 2>&1
}
for s in 100 101 102 103 104 105 106; do
  run default "$s" --pretrain-warmup 0
  run warmup "$s" --pretrain-warmup 20000
done
for s in 100 101 102 103 105 106; do run no_overlap "$s" --pretrain-warmup 0 --no-overlap; done
for s in 100 102 103; do
  run entropy_0.02 "$s" --pretrain-warmup 0 --entropy-coef 0.02
  run lambda_0 "$s" --pretrain-warmup 0 --alignment-lambda 0
  run lambda_10 "$s" --pretrain-warmup 0 --alignment-lambda 10
done
for s in 100 102; do run lr_final_0.3 "$s" --pretrain-warmup 0 --lr-final 0.3; done
