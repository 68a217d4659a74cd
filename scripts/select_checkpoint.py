"""Pick a policy to ship among the evaluated policies of one or more runs: every evals/ep_N.pt whose
in-training evaluation reached the compliance threshold (the K best of each run by that evaluation's
mixed reward) is played on the simulator in the six B_line/Meander settings of the CAGE2 protocol
(30/50/100 steps, greedy), on episodes of a seed other than the protocol's default, and ranked by the
sum of the six means. The margins against the CAGE2 winner's figures are printed beside.

    .venv/bin/python scripts/select_checkpoint.py RUN_DIR [RUN_DIR ...] [--top 6] [--episodes 1000]
        [--seed 4242] [--json OUT]
"""
import argparse
import csv
import json
import os

from wfrl.cage2_eval import LEADERBOARD, cage2_evaluate

REDS = ("B_lineAgent", "RedMeanderAgent")
LENGTHS = (30, 50, 100)


def candidates(run: str, top: int, theta: float):
    with open(os.path.join(run, "eval_log.csv")) as f:
        rows = [r for r in csv.DictReader(f) if float(r["Compliance"]) >= theta]
    rows.sort(key=lambda r: -float(r["Reward"]))
    for r in rows[:top]:
        path = os.path.join(run, "evals", f"ep_{int(r['Episodes']):08d}.pt")
        if os.path.exists(path):
            yield path, int(r["Episodes"]), float(r["Reward"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--theta", type=float, default=0.95)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = []
    for run in a.runs:
        for path, episodes, train_eval in candidates(run, a.top, a.theta):
            res = cage2_evaluate({"all": path}, episodes=a.episodes, seed=a.seed, reds=REDS,
                                 lengths=LENGTHS)
            means = {(s["red_agent"], s["steps"]): s["mean"] for s in res["settings"]}
            comp = min(s["compliance"] for s in res["settings"])
            row = {"checkpoint": path, "episodes": episodes, "training_eval": train_eval,
                   "total": round(sum(means.values()), 3), "min_compliance": comp,
                   "means": {f"{r}-{n}": round(m, 3) for (r, n), m in means.items()},
                   "margin_vs_winner": {f"{r}-{n}": round(m - LEADERBOARD["winner"][(r, n)], 3)
                                        for (r, n), m in means.items()}}
            rows.append(row)
            print(f"{path}: total {row['total']:.2f}  "
                  + " ".join(f"{k} {v:+.2f}" for k, v in row["margin_vs_winner"].items())
                  + f"  compliance ≥ {comp:.3f}", flush=True)
    rows.sort(key=lambda r: -r["total"])
    print("\nbest by total of the six settings:")
    for r in rows[:5]:
        print(f"  {r['total']:8.2f}  {r['checkpoint']}  " + json.dumps(r["means"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"episodes": a.episodes, "seed": a.seed, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
