#!/usr/bin/env bash
# The belief-input ablation (docs/bound.md): the shipped recipe (mixed red, critical_first,
# --no-first-fix-bonus, schedules annealed to 0.1) at EPISODES episodes with the memory block, the
# belief block of N particles, or both, LANES runs at a time (VARIANTS: a subset of the names); then every run's best.pt on the CAGE2
# protocol on the simulator (seed 153, 1,000 episodes per setting; training never plays seed 153).
#   bash experiments/belief_ablation.sh OUT_DIR
set -euo pipefail
out=$1
mkdir -p "$out"
export OMP_NUM_THREADS=1
py="$(dirname "$0")/../.venv/bin/python"
episodes=${EPISODES:-60000}
jobs=()
for seed in ${SEEDS:-1 2}; do
    jobs+=("memory_s$seed --memory" "memory_belief16_s$seed --memory --belief-input 16"
           "memory_belief32_s$seed --memory --belief-input 32"
           "memory_belief64_s$seed --memory --belief-input 64"
           "belief32_s$seed --no-memory --belief-input 32")
done
if [ -n "${VARIANTS:-}" ]; then
    keep=()
    for j in "${jobs[@]}"; do
        for v in $VARIANTS; do [[ "${j%% *}" == "${v}_s"* ]] && keep+=("$j"); done
    done
    jobs=("${keep[@]}")
fi
run() {
    set -- $1
    name=$1; shift
    seed=${name##*_s}
    "$py" -m wfrl train --workflow critical_first --red-agent mixed --collector sequential \
        --seed "$seed" --total-episodes "$episodes" --min-episodes "$episodes" \
        --episodes-per-update 200 --mask --lr-final 0.1 --entropy-final 0.1 --eval-every 5000 \
        --eval-episodes 500 --no-first-fix-bonus --clip-per-net "$@" --out "$out/$name" --force \
        > "$out/$name.log" 2>&1
    "$py" -m wfrl eval --cage2 --checkpoint "$out/$name/best.pt" --backend sim --json \
        > "$out/$name.cage2.json" 2> "$out/$name.cage2.err"
}
export -f run
export py out episodes
printf '%s\n' "${jobs[@]}" | xargs -P "${LANES:-2}" -I{} bash -c 'run "{}"'
