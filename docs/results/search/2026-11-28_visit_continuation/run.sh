#!/bin/bash
# Visits of default searches whose workflows put user before enterprise, trained on from the
# visit's own policy to 3,000 episodes at the visit's settings (the schedules' end values: lr
# 0.0002, entropy weight 0.001, mixed red, 200 episodes per update), each evaluated greedy on the
# same 400 episodes per red before and after.
#   bash run.sh SEARCH_DIR OUT_DIR [BACKEND] > continuation.txt   (SEARCH_DIR: a finished search)
set -e
S=$1; OUT=$2; B=${3:-sim}; PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
score() {
  for red in B_lineAgent RedMeanderAgent; do
    $PY -m wfrl eval --checkpoint "$1" --backend $B --red-agent $red --episodes 400 --seed 777 --json \
      | $PY -c "import json,sys; g=json.load(sys.stdin); assert g['policy'] == 'greedy'; print(f\"{g['compliance']:.4f}\", end=' ')"
  done
}
echo "workflow | visit episodes | greedy compliance B_line Meander: at the visit's end | after 3,000 episodes"
$PY - "$S" <<'PYEOF' | while IFS=: read -r wid order eps; do
import csv, sys
last = {}   # a workflow visited again: its checkpoint is the last visit's
for r in csv.DictReader(open(sys.argv[1] + "/gp_sampling_log.csv")):
    t = r["Workflow"].split(",")
    if t.index("user") < t.index("enterprise"):
        last[r["Workflow"]] = f"{int(r['Workflow_ID']):03d}:{r['Workflow']}:{r['Episodes_Trained']}"
print("\n".join(last.values()))
PYEOF
  ck="$S/checkpoints/wf_$wid.pt"
  more=$((3000 - eps))
  $PY -m wfrl train --workflow "$order" --init-from "$ck" --backend $B --red-agent mixed --total-episodes $more \
      --min-episodes $more --episodes-per-update 200 --lr 0.0002 --lr-final 1 --entropy-coef 0.001 \
      --entropy-final 1 --no-first-fix-bonus --eval-every 0 --collector sequential --seed 5 \
      --out "$OUT/wf$wid" --force > "$OUT/wf$wid.log" 2>&1
  echo "$order | $eps | $(score "$ck")| $(score "$OUT/wf$wid/checkpoint.pt")"
done
