#!/usr/bin/env bash
# The privileged-learning ablation (docs/privileged.md): the shipped recipe (mixed red,
# critical_first, memory and mask, --no-first-fix-bonus, schedules annealed to 0.1) at EPISODES
# episodes, alone and with each route: the privileged critic, the teacher (TEACHER: a
# --truth-input checkpoint) with and without its per-state weighting, and both, and the cheaper
# forms (_fast: two passes of the privileged critic, one step of the teacher's); LANES runs at a
# time (VARIANTS: a subset of the names). Then every run's best.pt on the CAGE2 protocol on the
# simulator (seed 153, 1,000 episodes per setting; training never plays seed 153).
#   TEACHER=ckpt.pt bash experiments/privileged_ablation.sh OUT_DIR
set -euo pipefail
out=$1
mkdir -p "$out"
export OMP_NUM_THREADS=1
py="$(dirname "$0")/../.venv/bin/python"
episodes=${EPISODES:-60000}
teacher=${TEACHER:?TEACHER=checkpoint of a --truth-input policy}
jobs=()
for seed in ${SEEDS:-1 2}; do
    jobs+=("recipe_s$seed" "pcritic_s$seed --privileged-critic"
           "teacher_s$seed --teacher $teacher"
           "teacher_flat_s$seed --teacher $teacher --teacher-alpha 0"
           "pcritic_teacher_s$seed --privileged-critic --teacher $teacher"
           "pcritic_fast_s$seed --privileged-critic --privileged-epochs 2"
           "pcritic_teacher_fast_s$seed --privileged-critic --privileged-epochs 2 --teacher $teacher --teacher-steps 1")
done
if [ -n "${VARIANTS:-}" ]; then
    keep=()
    for j in "${jobs[@]}"; do
        for v in $VARIANTS; do [[ "${j%% *}" == "${v}_s"[0-9]* ]] && keep+=("$j"); done
    done
    jobs=("${keep[@]}")
fi
run() {
    set -- $1
    name=$1; shift
    seed=${name##*_s}
    "$py" -m wfrl train --workflow critical_first --red-agent mixed --collector sequential \
        --seed "$seed" --total-episodes "$episodes" --min-episodes "$episodes" \
        --episodes-per-update 200 --memory --mask --lr-final 0.1 --entropy-final 0.1 \
        --eval-every 5000 --eval-episodes 500 --no-first-fix-bonus --clip-per-net "$@" \
        --out "$out/$name" --force > "$out/$name.log" 2>&1
    "$py" -m wfrl eval --cage2 --checkpoint "$out/$name/best.pt" --backend sim --json \
        > "$out/$name.cage2.json" 2> "$out/$name.cage2.err"
}
export -f run
export py out episodes
printf '%s\n' "${jobs[@]}" | xargs -P "${LANES:-2}" -I{} bash -c 'run "{}"'
