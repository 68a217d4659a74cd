"""Pick a policy to ship among the evaluated policies of one or more runs: every evals/ep_N.pt whose
in-training evaluation reached the compliance threshold (the K best of each run by that evaluation's
mixed reward) is played on the simulator in the six B_line/Meander settings of the CAGE2 protocol
(30/50/100 steps, greedy), on episodes of a seed other than the protocol's default, and ranked by the
sum of the six means. The margins against the CAGE2 winner's figures are printed beside.

--screen N (default 200,000; 0: off) also plays N simulator episodes of B_line and of Meander at 50
steps (same seed) and counts the catastrophic ones (return below -100): a policy with any is ranked
after every policy without. Such a failure can be rare enough (0.01-0.02 % of simulator episodes)
that the 1,000-episode means do not show it, and ten times as frequent on CybORG
(docs/evaluation.md, "Choosing the policy to ship"); N = 200,000 costs seconds per candidate.

    .venv/bin/python scripts/select_checkpoint.py RUN_DIR [RUN_DIR ...] [--top 6] [--episodes 1000]
        [--seed 4242] [--screen 200000] [--backend sim|sim:leaderboard] [--json OUT]
"""
import argparse
import csv
import json
import os

from wfrl.evaluation.cage2 import LEADERBOARD, cage2_evaluate
from wfrl.evaluation.screen import returns

CATASTROPHE = -100.0
SCREEN_STEPS = 50

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
    ap.add_argument("--screen", type=int, default=200_000)
    ap.add_argument("--backend", default="sim", choices=("sim", "sim:leaderboard"),
                    help="the simulator by the installed CybORG's code or by the leaderboard's")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = []
    for run in a.runs:
        for path, episodes, train_eval in candidates(run, a.top, a.theta):
            res = cage2_evaluate({"all": path}, backend=a.backend, episodes=a.episodes,
                                 seed=a.seed, reds=REDS, lengths=LENGTHS)
            means = {(s["red_agent"], s["steps"]): s["mean"] for s in res["settings"]}
            comp = min(s["compliance"] for s in res["settings"])
            row = {"checkpoint": path, "episodes": episodes, "training_eval": train_eval,
                   "total": round(sum(means.values()), 3), "min_compliance": comp,
                   "means": {f"{r}-{n}": round(m, 3) for (r, n), m in means.items()},
                   "margin_vs_winner": {f"{r}-{n}": round(m - LEADERBOARD["winner"][(r, n)], 3)
                                        for (r, n), m in means.items()}}
            if a.screen:
                row["catastrophes"] = {
                    f"{red}-{SCREEN_STEPS}": int((returns(path, red, SCREEN_STEPS, a.screen, a.seed,
                                                          a.backend) < CATASTROPHE).sum())
                    for red in REDS}
                row["screen_episodes"] = a.screen
            rows.append(row)
            print(f"{path}: total {row['total']:.2f}  "
                  + " ".join(f"{k} {v:+.2f}" for k, v in row["margin_vs_winner"].items())
                  + f"  compliance ≥ {comp:.3f}"
                  + (f"  catastrophes {row['catastrophes']}" if a.screen else ""), flush=True)
    rows.sort(key=lambda r: (sum(r.get("catastrophes", {}).values()) > 0, -r["total"]))
    print("\nbest by total of the six settings" + (", policies without a catastrophe first:"
                                                     if a.screen else ":"))
    for r in rows[:5]:
        print(f"  {r['total']:8.2f}  {r['checkpoint']}  " + json.dumps(r["means"])
              + (f"  catastrophes {r['catastrophes']}" if a.screen else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"backend": a.backend, "episodes": a.episodes, "seed": a.seed,
                       "screen": a.screen, "rows": rows},
                      f, indent=1)


if __name__ == "__main__":
    main()
