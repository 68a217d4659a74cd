#!/usr/bin/env bash
# The robustness table (docs/robustness.md): shipped policies against CAGE2's B_line and Meander
# and their nine variants (wfrl.envs.reds), 30/50/100 steps, on the installed CybORG, EPISODES per
# setting on the protocol's reserved episodes (seed 153), with each episode's record for
# `wfrl compare`; and the generalising policy's training (the shipped recipe's command on the
# family-train pool) when GENERALISE=1.
#   bash experiments/robustness.sh OUT [POLICY ...]     # POLICY: NAME=CHECKPOINT[@WORKFLOW]
set -euo pipefail
out=$1; shift
mkdir -p "$out"
export OMP_NUM_THREADS=1
py="$(dirname "$0")/../.venv/bin/python"
if [ "${GENERALISE:-0}" = 1 ]; then
    "$py" -m wfrl train --workflow critical_first --red-agent family-train --collector sequential \
        --seed 7 --total-episodes 300000 --min-episodes 300000 --episodes-per-update 200 \
        --memory --mask --lr-final 0.1 --entropy-final 0.1 --eval-every 5000 --eval-episodes 500 \
        --no-first-fix-bonus --out "$out/generalising" --force > "$out/generalising.log" 2>&1
fi
for spec in "$@"; do
    name=${spec%%=*}; rest=${spec#*=}
    ck=${rest%@*}; wf=""
    [[ "$rest" == *@* ]] && wf="--workflow ${rest#*@}"
    "$py" -m wfrl eval --cage2 --backend "${BACKEND:-cyborg}" --reds "${REDS:-family}" \
        --episodes "${EPISODES:-300}" --checkpoint "$ck" $wf --n-workers "${WORKERS:-2}" \
        --out "$out/$name.json" --episodes-out "$out/$name.jsonl" > "$out/$name.txt" 2> "$out/$name.err"
done
