#!/usr/bin/env bash
# The learner ablation behind the default recipe (docs/training.md): one lane of single-workflow
# runs on the simulator, B_lineAgent, critical_first, one after another. Each run evaluates its
# greedy policy every 5,000 episodes on 500 reserved episodes (eval_log.csv). The schedules and
# the first-fix bonus are pinned to what the recipe preset gave when the records were made
# (constant, bonus on); the flags given after NAME override them.
#   bash experiments/recipe_ablation.sh OUT_DIR NAME [extra wfrl train flags...]
set -euo pipefail
out=$1; name=$2; shift 2
mkdir -p "$out"
export OMP_NUM_THREADS=1
exec "$(dirname "$0")/../.venv/bin/python" -m wfrl train --workflow critical_first \
    --red-agent "${RED:-B_lineAgent}" --collector sequential --seed "${SEED:-1}" \
    --total-episodes "${EPISODES:-100000}" --min-episodes "${EPISODES:-100000}" \
    --eval-every 5000 --eval-episodes 500 --lr-final 1 --entropy-final 1 --first-fix-bonus \
    --out "$out/$name" --force "$@" \
    > "$out/$name.log" 2>&1
