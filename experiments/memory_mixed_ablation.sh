#!/usr/bin/env bash
# What the memory block buys against the mixed red: the recipe with and without --memory,
# --red-agent mixed, critical_first, 40,000 episodes, greedy evaluation on 500 reserved episodes
# every 5,000 (half B_line, half Meander); seeds given (default 1 2), one run after another.
#   bash experiments/memory_mixed_ablation.sh OUT [SEEDS...]     # ≈ 7 min per run on one core
set -euo pipefail
out=$1; shift
seeds=${*:-1 2}
here=$(dirname "$0")
for s in $seeds; do
  RED=mixed SEED=$s EPISODES=40000 bash "$here/recipe_ablation.sh" "$out" mixed_mem_seed$s --memory
  RED=mixed SEED=$s EPISODES=40000 bash "$here/recipe_ablation.sh" "$out" mixed_nomem_seed$s --no-memory
done
