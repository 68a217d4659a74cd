#!/usr/bin/env bash
# The compiled minibatch step (PPOLearner(compiled=True), the default) against the torch steps it
# replaced (compiled=False): single-workflow recipe runs as experiments/recipe_ablation.sh makes them
# (simulator, B_lineAgent, critical_first, sequential collector, 40,000 episodes, greedy
# evaluation on 500 reserved episodes every 5,000), seeds 2-4, two runs at a time.
#   bash docs/results/recipe/2026-11-28_compiled_vs_torch_steps/steps_ablation.sh OUT [SEEDS...]
set -euo pipefail
out=$1; shift
seeds=${*:-2 3 4}
mkdir -p "$out"
export OMP_NUM_THREADS=1
run() {   # NAME COMPILED SEED
  .venv/bin/python - "$1" "$2" "$3" "$out" <<'PY' > "$4/$1.log" 2>&1
import sys
name, compiled, seed, out = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]
import wfrl.ppo.learner as L
d = L.PPOLearner.__init__.__defaults__
L.PPOLearner.__init__.__defaults__ = d[:-1] + (compiled,)     # the last one: compiled
assert L.PPOLearner(L.PPOConfig()).compiled == compiled
print("compiled steps:", compiled, flush=True)
from wfrl.cli import main
sys.exit(main(["train", "--workflow", "critical_first", "--red-agent", "B_lineAgent",
               "--collector", "sequential", "--seed", seed, "--total-episodes", "40000",
               "--min-episodes", "40000", "--eval-every", "5000", "--eval-episodes", "500",
               "--out", f"{out}/{name}", "--force"]))
PY
}
for s in $seeds; do
  run compiled_seed$s 1 $s "$out" &
  run torch_seed$s 0 $s "$out" &
  wait
done
