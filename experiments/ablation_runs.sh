# Sourced by the *_ablation.sh scripts: run_ablation OUT_DIR trains every job of the array `jobs`
# ("NAME_sSEED FLAG ...", kept to the names in VARIANTS when it is set) with the shipped recipe's
# command (mixed red, critical_first, 200 episodes per update, mask, schedules annealed to 0.1,
# --no-first-fix-bonus, --clip-per-net, periodic evaluation) plus $common_flags and the job's
# flags, EPISODES episodes, LANES runs at a time; then each run's best.pt on the CAGE2 protocol
# on the simulator (seed 153, 1,000 episodes per setting; training never plays seed 153).
run_ablation() {
    out=$1
    mkdir -p "$out"
    export OMP_NUM_THREADS=1
    py="$(dirname "${BASH_SOURCE[0]}")/../.venv/bin/python"
    episodes=${EPISODES:-60000}
    if [ -n "${VARIANTS:-}" ]; then
        local keep=() j v
        for j in "${jobs[@]}"; do
            for v in $VARIANTS; do [[ "${j%% *}" == "${v}_s"[0-9]* ]] && keep+=("$j"); done
        done
        jobs=("${keep[@]}")
    fi
    export py out episodes common_flags
    export -f ablation_run
    printf '%s\n' "${jobs[@]}" | xargs -P "${LANES:-2}" -I{} bash -c 'ablation_run "{}"'
}

ablation_run() {
    set -- $1
    local name=$1; shift
    local seed=${name##*_s}
    "$py" -m wfrl train --workflow critical_first --red-agent mixed --collector sequential \
        --seed "$seed" --total-episodes "$episodes" --min-episodes "$episodes" \
        --episodes-per-update 200 --mask --lr-final 0.1 --entropy-final 0.1 --eval-every 5000 \
        --eval-episodes 500 --no-first-fix-bonus --clip-per-net $common_flags "$@" \
        --out "$out/$name" --force > "$out/$name.log" 2>&1
    "$py" -m wfrl eval --cage2 --checkpoint "$out/$name/best.pt" --backend sim --json \
        > "$out/$name.cage2.json" 2> "$out/$name.cage2.err"
}
