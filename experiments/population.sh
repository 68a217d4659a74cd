#!/usr/bin/env bash
# Population training (docs/robustness.md, "A defender against reds that learn"): the loop with
# both meta-solvers and the ablation without the scripted share, then the chosen defender's
# exploitability at the attacker's budget and the workflow question against adaptive reds.
#   bash experiments/population.sh OUT            # the three loops (5 rounds each)
#   STAGE=exploit DEFENDER=CK bash experiments/population.sh OUT
#   STAGE=orders DEFENDER=CK bash experiments/population.sh OUT
#   STAGE=search POP=OUT/nash/rounds/005/population.json bash experiments/population.sh OUT
set -euo pipefail
out=$1; shift
mkdir -p "$out"
export OMP_NUM_THREADS=1
here="$(dirname "$0")"
py="$here/../.venv/bin/python"
case "${STAGE:-loops}" in
loops)
    for solver in nash uniform; do
        [ -f "$out/$solver/summary.json" ] && continue
        "$py" -m wfrl population --meta-solver "$solver" --rounds 5 --seed 0 \
            --out "$out/$solver" --force > "$out/$solver.log" 2>&1
    done
    # the ablation: the meta-solver alone, no share kept on the scripted reds
    [ -f "$out/nash_no_floor/summary.json" ] || \
        "$py" -m wfrl population --meta-solver nash --scripted-share 0 --rounds 5 --seed 0 \
            --out "$out/nash_no_floor" --force > "$out/nash_no_floor.log" 2>&1 || true
    ;;
exploit)
    # the attacker's budget: 3 seeds x 50,000 episodes, evaluations on 1,000 episodes; seeds
    # no best response of the loops used (theirs: 1..6), so every red here is fresh
    SEEDS="11 12 13" bash "$here/exploitability.sh" "$out/attacks" \
        "robust=$DEFENDER@critical_first"
    ;;
orders)
    # the strongest fresh red per order, for the population's defender and any_workflow
    for wf in critical_first reverse user,defender,op_host,enterprise,op_server \
              defender,user,op_host,op_server,enterprise; do
        tag=$(echo "$wf" | tr ',' '-')
        SEEDS=11 bash "$here/exploitability.sh" "$out/orders" "robust_$tag=$DEFENDER@$wf" \
            "any_workflow_$tag=pretrained:any_workflow@$wf"
    done
    ;;
search)
    # the workflow search against CAGE2's reds and against a pool with the learned reds
    "$py" -m wfrl train --seed 1 --out "$out/search_mixed" --force > "$out/search_mixed.log" 2>&1
    "$py" -m wfrl train --seed 1 --red-agent "population:$POP" --out "$out/search_population" \
        --force > "$out/search_population.log" 2>&1
    ;;
esac
