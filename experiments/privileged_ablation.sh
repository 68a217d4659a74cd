#!/usr/bin/env bash
# The privileged-learning ablation (docs/limit.md): the shipped recipe (memory and mask) at
# EPISODES episodes, alone and with each route: the privileged critic, the teacher (TEACHER: a
# --truth-input checkpoint) with and without its per-state weighting, and both, and the cheaper
# forms (_fast: two passes of the privileged critic, one step of the teacher's), and the teacher
# annealed to a floor of 0.1 or 0.25 instead of 0 (_floor10, _floor25); VARIANTS: a
# subset of the names (the command and the evaluation: experiments/ablation_runs.sh).
#   TEACHER=ckpt.pt bash experiments/privileged_ablation.sh OUT_DIR
set -euo pipefail
source "$(dirname "$0")/ablation_runs.sh"
teacher=${TEACHER:?TEACHER=checkpoint of a --truth-input policy}
jobs=()
for seed in ${SEEDS:-1 2}; do
    jobs+=("recipe_s$seed" "pcritic_s$seed --privileged-critic"
           "teacher_s$seed --teacher $teacher"
           "teacher_flat_s$seed --teacher $teacher --teacher-alpha 0"
           "pcritic_teacher_s$seed --privileged-critic --teacher $teacher"
           "pcritic_teacher_noanneal_s$seed --privileged-critic --teacher $teacher --teacher-anneal 1"
           "pcritic_teacher_floor10_s$seed --privileged-critic --teacher $teacher --teacher-floor 0.1"
           "pcritic_teacher_floor25_s$seed --privileged-critic --teacher $teacher --teacher-floor 0.25"
           "pcritic_fast_s$seed --privileged-critic --privileged-epochs 2"
           "pcritic_teacher_fast_s$seed --privileged-critic --privileged-epochs 2 --teacher $teacher --teacher-steps 1")
done
common_flags="--memory"
run_ablation "$1"
