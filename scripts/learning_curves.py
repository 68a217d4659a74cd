"""Learning curves of training runs: the simulator line from each run's eval_log.csv (greedy policy,
reserved episodes) and CybORG points from its evaluation snapshots (evals/ep_N.pt) played on the
real CybORG against the run's red agent (mixed runs: against B_lineAgent), 100 steps.

    .venv/bin/python scripts/learning_curves.py --out docs/learning_curves.png \
        --cyborg-points 4 --cyborg-episodes 100 RUN_DIR:LABEL [RUN_DIR:LABEL ...]

The CybORG results are cached in OUT with .json (delete it to measure again).
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np


def _sim_curve(run: Path):
    rows = list(csv.DictReader(open(run / "eval_log.csv")))
    return ([int(r["Episodes"]) for r in rows], [float(r["Reward"]) for r in rows],
            [float(r["Reward_SE"]) for r in rows])


def _cyborg_point(ckpt: Path, red: str, episodes: int, seed: int) -> dict:
    from wfrl.envs import make_backend
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.evaluation.returns import play, summarise
    from wfrl.runlog import load_checkpoint
    from wfrl.workflow import Workflow
    ck = load_checkpoint(ckpt)
    weights, net = weights_from_checkpoint(ck)
    cfg = ck.get("config", {})
    backend = make_backend("cyborg", red)
    try:
        s = summarise(play(backend, weights, net, Workflow.parse(ck["workflow"]),
                           float(cfg.get("alignment_lambda", 30.0)),
                           bool(cfg.get("count_foothold", False)), range(episodes), seed, True))
    finally:
        backend.close()
    return {"episodes": int(ck["episodes"]), "mean": s["mean"], "se": s["se"], "n": s["n"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="RUN_DIR:LABEL")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cyborg-points", type=int, default=4)
    ap.add_argument("--cyborg-episodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=777)
    a = ap.parse_args(argv)
    cache_path = Path(a.out).with_suffix(".json")
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k, spec in enumerate(a.runs):
        path, label = spec.rsplit(":", 1)
        run = Path(path)
        cfg = json.loads((run / "experiment_config.json").read_text())
        red = cfg["red_agent"] if cfg["red_agent"] != "mixed" else "B_lineAgent"
        x, y, se = _sim_curve(run)
        color = f"C{k}"
        ax.plot(x, y, color=color, label=f"{label}: simulator (500 reserved episodes)")
        ax.fill_between(x, np.array(y) - 2 * np.array(se), np.array(y) + 2 * np.array(se),
                        color=color, alpha=0.2)
        snaps = sorted((run / "evals").glob("ep_*.pt"))
        if snaps and a.cyborg_points > 0:
            idx = np.unique(np.linspace(0, len(snaps) - 1, a.cyborg_points).round().astype(int))
            pts = []
            for i in idx:
                key = f"{run.resolve().name}|{snaps[i].name}|{red}|{a.cyborg_episodes}|{a.seed}"
                if key not in cache:
                    cache[key] = _cyborg_point(snaps[i], red, a.cyborg_episodes, a.seed)
                    cache_path.write_text(json.dumps(cache, indent=1))
                pts.append(cache[key])
            ax.errorbar([p["episodes"] for p in pts], [p["mean"] for p in pts],
                        yerr=[2 * p["se"] for p in pts], fmt="o", color=color, capsize=3,
                        label=f"{label}: real CybORG ({a.cyborg_episodes} episodes, ± 2 se)")
    ax.set_xlabel("training episodes")
    ax.set_ylabel("greedy return per 100-step episode vs B_lineAgent")
    ax.set_ylim(-60, 0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
