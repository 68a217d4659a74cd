#!/usr/bin/env bash
# Does a one-version-stale batch (--overlap) slow PPO down, and does the decoupled objective
# (--decoupled, the default) fix it? B_lineAgent, critical_first, recipe (lambda 0.95, 200
# episodes per update), 40,000 episodes, greedy evaluation on 500 reserved episodes every 5,000;
# seeds 2-4, three variants each, one run after another:
#   noovl  --no-overlap                  (fresh batches: ordinary PPO)
#   ovl    --overlap --no-decoupled       (stale batches, ratio against the behaviour policy)
#   dec    --overlap --decoupled          (stale batches, decoupled objective)
#   bash experiments/overlap_ablation.sh OUT [SEEDS...]       # ≈ 7 min per run on one core
set -euo pipefail
out=$1; shift
seeds=${*:-2 3 4}
here=$(dirname "$0")
for s in $seeds; do
  SEED=$s EPISODES=40000 bash "$here/recipe_ablation.sh" "$out" l95_noovl_seed$s --no-overlap
  SEED=$s EPISODES=40000 bash "$here/recipe_ablation.sh" "$out" l95_ovl_seed$s --overlap --no-decoupled
  SEED=$s EPISODES=40000 bash "$here/recipe_ablation.sh" "$out" l95_dec_seed$s --overlap --decoupled
done
