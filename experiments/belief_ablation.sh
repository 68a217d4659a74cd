#!/usr/bin/env bash
# The belief-input ablation (docs/limit.md): the shipped recipe at EPISODES episodes with the
# memory block, the belief block of N particles, or both (VARIANTS: a subset of the names; the
# command and the evaluation: experiments/ablation_runs.sh).
#   bash experiments/belief_ablation.sh OUT_DIR
set -euo pipefail
source "$(dirname "$0")/ablation_runs.sh"
jobs=()
for seed in ${SEEDS:-1 2}; do
    jobs+=("memory_s$seed --memory" "memory_belief16_s$seed --memory --belief-input 16"
           "memory_belief32_s$seed --memory --belief-input 32"
           "memory_belief64_s$seed --memory --belief-input 64"
           "belief32_s$seed --no-memory --belief-input 32")
done
common_flags=""
run_ablation "$1"
