"""Cross-play of population runs: every defender of the runs (defenders/dNNN.pt) against every
learned red they trained (rounds/NNN/attack/best.pt, final/attack/best.pt) and the shipped
learned reds, on the simulator (greedy defender under --workflow, each red sampling as
`learned:` plays it, the same held-out episodes for all). A defender's worst return over all
these reds bounds its exploitability from below far better than its own fresh red alone.

    python experiments/population_crossplay.py --runs nash=RUN uniform=RUN --episodes 500 \
        --out crossplay.json
    python experiments/population_crossplay.py --defenders NAME=CHECKPOINT ... \
        --reds NAME=learned:PATH ... --out table.json     # named defenders and reds only
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

SHIPPED = ("vs_any_workflow", "vs_critical_first", "vs_generalising")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="*", default=[], metavar="NAME=RUN")
    ap.add_argument("--defenders", nargs="*", default=[], metavar="NAME=CHECKPOINT")
    ap.add_argument("--reds", nargs="*", default=None, metavar="NAME=RED",
                    help="these learned reds instead of the shipped ones")
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--workflow", default="critical_first")
    ap.add_argument("--backend", default="sim")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    from wfrl.envs import make_backend
    from wfrl.evaluation.checkpoint import policy_of_checkpoint
    from wfrl.evaluation.returns import play, summarise
    from wfrl.rng import EVAL_EPISODE_BASE
    from wfrl.workflow import Workflow
    defenders = dict(d.split("=", 1) for d in a.defenders)
    reds = (dict(r.split("=", 1) for r in a.reds) if a.reds is not None
            else {f"shipped:{n}": f"learned:{n}" for n in SHIPPED})
    for spec in a.runs:
        name, run = spec.split("=", 1)
        run = Path(run)
        for d in sorted((run / "defenders").glob("d*.pt")):
            defenders[f"{name}:{d.stem}"] = str(d)
        for br in sorted(run.glob("rounds/*/attack/best.pt")):
            reds[f"{name}:BR{int(br.parts[-3])}"] = f"learned:{br}"
        final = run / "final" / "attack" / "best.pt"
        if final.exists():
            reds[f"{name}:final"] = f"learned:{final}"
    reds = {"B_lineAgent": "B_lineAgent", "RedMeanderAgent": "RedMeanderAgent", **reds}
    eps = range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + a.episodes)
    matrix = {}
    for dname, path in defenders.items():
        weights, net, wf, lam, foothold = policy_of_checkpoint(path, a.workflow)
        row = {}
        for rname, red in reds.items():
            s = summarise(play(make_backend(a.backend, red, seed=a.seed), weights, net,
                               Workflow.parse(wf), lam, foothold, eps, a.seed, greedy=True))
            row[rname] = {"mean": round(s["mean"], 3), "se": round(s["se"], 3)}
        learned = {k: v for k, v in row.items() if k not in ("B_lineAgent", "RedMeanderAgent")}
        worst = min(learned, key=lambda k: learned[k]["mean"])
        row["worst_learned"] = worst
        row["exploitability_bound"] = round(row["B_lineAgent"]["mean"] - learned[worst]["mean"], 3)
        matrix[dname] = row
        print(f"{dname:14s} B_line {row['B_lineAgent']['mean']:7.2f}  worst {worst:18s} "
              f"{learned[worst]['mean']:8.2f}  bound {row['exploitability_bound']:6.1f}",
              flush=True)
    a.out.write_text(json.dumps({"episodes": a.episodes, "seed": a.seed,
                                 "workflow": a.workflow, "backend": a.backend,
                                 "held_out": f"{EVAL_EPISODE_BASE}..", "matrix": matrix},
                                indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
