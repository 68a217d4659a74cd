"""Table of steps_ablation.sh's runs: greedy evaluations (500 reserved episodes each) per seed,
at 40,000 episodes and averaged over the five from 20,000 to 40,000; then the means over seeds.
    python steps_table.py steps"""
import csv
import statistics
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else "steps")
seeds = sorted({int(p.name.split("seed")[1]) for p in root.iterdir() if p.is_dir()})
rows = {}
for variant in ("torch", "compiled"):
    for s in seeds:
        with open(root / f"{variant}_seed{s}" / "eval_log.csv") as f:
            ev = {int(r["Episodes"]): (float(r["Reward"]), float(r["Reward_SE"])) for r in csv.DictReader(f)}
        late = [ev[e][0] for e in range(20000, 40001, 5000)]
        rows[variant, s] = (ev[40000], statistics.mean(late))
print("seed | torch steps @40k | compiled @40k | torch mean 20k-40k | compiled mean 20k-40k")
for s in seeds:
    (t40, tse), tl = rows["torch", s]
    (c40, cse), cl = rows["compiled", s]
    print(f"{s} | {t40:.2f} ± {tse:.2f} | {c40:.2f} ± {cse:.2f} | {tl:.2f} | {cl:.2f}")
for variant in ("torch", "compiled"):
    at40 = [rows[variant, s][0][0] for s in seeds]
    late = [rows[variant, s][1] for s in seeds]
    print(f"{variant}: mean over {len(seeds)} seeds @40k {statistics.mean(at40):.2f} "
          f"(sd {statistics.stdev(at40):.2f}), mean 20k-40k {statistics.mean(late):.2f} "
          f"(sd {statistics.stdev(late):.2f})")
diff = [rows["compiled", s][1] - rows["torch", s][1] for s in seeds]
print(f"compiled - torch, mean 20k-40k per seed: {', '.join(f'{d:+.2f}' for d in diff)}; "
      f"mean {statistics.mean(diff):+.2f}, se {statistics.stdev(diff) / len(diff) ** 0.5:.2f}")
