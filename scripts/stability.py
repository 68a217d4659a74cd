"""Spread of a recipe over training seeds: each run's selected policy (best.pt) evaluated greedily
on 1,000 fresh simulator episodes against B_lineAgent (100 steps, CAGE2 protocol episodes of seed
153), then the mean and the standard deviation across the runs.

    .venv/bin/python scripts/stability.py RUN_DIR [RUN_DIR ...] [--backend sim:leaderboard] [--json OUT]
"""
import argparse
import json

import numpy as np

from wfrl.evaluation.cage2 import cage2_evaluate


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--backend", default="sim", choices=("sim", "sim:leaderboard"))
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = []
    for run in a.runs:
        res = cage2_evaluate({"all": f"{run}/best.pt"}, backend=a.backend, episodes=a.episodes,
                             seed=153, reds=("B_lineAgent",), lengths=(100,))
        r = res["settings"][0]
        rows.append({"run": run, "mean": r["mean"], "se": r["se"], "compliance": r["compliance"]})
        print(f"{run}: {r['mean']:.2f} ± {r['se']:.2f} (compliance {r['compliance']})", flush=True)
    means = np.array([r["mean"] for r in rows])
    summary = {"backend": a.backend, "runs": rows, "mean": round(float(means.mean()), 3),
               "sd_across_runs": round(float(means.std(ddof=1)), 3), "episodes": a.episodes}
    print(f"mean {summary['mean']:.2f}, sd across {len(rows)} runs {summary['sd_across_runs']:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
