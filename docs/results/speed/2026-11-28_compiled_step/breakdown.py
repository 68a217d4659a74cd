"""Per-run totals of a default run: updates, episodes, collection and update seconds (sums of
training_log.csv columns), wall time (summary.json) and visits.
    python docs/results/speed/2026-11-28_compiled_step/breakdown.py RUN_DIR...
"""
import csv, json, sys
from pathlib import Path
for run in sys.argv[1:]:
    p = Path(run)
    rows = list(csv.DictReader(open(p / "training_log.csv")))
    coll = sum(float(r["Collection_Time"]) for r in rows)
    upd = sum(float(r["Update_Time"]) for r in rows)
    summ = json.load(open(p / "summary.json"))
    visits = len(list(csv.DictReader(open(p / "gp_sampling_log.csv"))))
    print(f"{run}: updates {len(rows)} episodes {rows[-1]['Total_Episodes_Sampled']} collect {coll:.1f} s update {upd:.1f} s wall {summ.get('wall_s', summ.get('wall_time_s', 'n/a'))} visits {visits}")
