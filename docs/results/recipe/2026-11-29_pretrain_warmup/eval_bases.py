"""Every pretrained base of the warm-up ablation, greedy on all 120 workflows against B_line and
Meander (100 steps, EPISODES reserved evaluation episodes each, the ground truth's episodes and
seed), summarised per base: mean reward per red, compliance over the 120 workflows, the
user-before-enterprise class's compliance and how many workflows reach θ = 0.95.

usage: python eval_bases.py RUNS_DIR OUT.json   (RUNS_DIR/<arm>/seed<N>/checkpoints/base.pt)
"""
import json
import sys
from pathlib import Path

import numpy as np

from wfrl.checkpoint import weights_from_checkpoint
from wfrl.envs import EP_LEN, make_backend
from wfrl.evaluate import play, summarise
from wfrl.rng import EVAL_EPISODE_BASE
from wfrl.runlog import load_checkpoint
from wfrl.search.truth import EVAL_SEED
from wfrl.workflow import UNIT_TYPES, all_workflows

EPISODES = 100
THETA = 0.95
REDS = ("B_lineAgent", "RedMeanderAgent")


def user_first(wf) -> bool:
    return wf.rank[UNIT_TYPES.index("user")] < wf.rank[UNIT_TYPES.index("enterprise")]


def evaluate_base(path: Path) -> dict:
    weights, net = weights_from_checkpoint(load_checkpoint(path))
    wfs = all_workflows()
    reward = np.zeros((len(REDS), len(wfs)))
    compliance = np.zeros_like(reward)
    episodes = range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + EPISODES)
    for i, red in enumerate(REDS):
        backend = make_backend("sim", red, seed=EVAL_SEED)
        try:
            for j, wf in enumerate(wfs):
                s = summarise(play(backend, weights, net, wf, 30.0, False, episodes, EVAL_SEED,
                                   greedy=True, horizon=EP_LEN))
                reward[i, j], compliance[i, j] = s["mean"], s["compliance"]
        finally:
            backend.close()
    comp = compliance.mean(axis=0)            # mean over the two reds, as the truth's tables
    uf = np.array([user_first(wf) for wf in wfs])
    return {"reward_B_line": round(float(reward[0].mean()), 3),
            "reward_Meander": round(float(reward[1].mean()), 3),
            "reward_mean_of_reds": round(float(reward.mean()), 3),
            "compliance_mean": round(float(comp.mean()), 4),
            "compliance_min": round(float(comp.min()), 4),
            "user_before_enterprise_compliance": round(float(comp[uf].mean()), 4),
            "enterprise_before_user_compliance": round(float(comp[~uf].mean()), 4),
            "workflows_at_or_above_theta": int((comp >= THETA).sum())}


def main(runs: Path, out: Path) -> None:
    result = json.loads(out.read_text()) if out.exists() else {}
    for base in sorted(runs.glob("*/seed*/checkpoints/base.pt")):
        arm, seed = base.parts[-4], base.parts[-3]
        key = f"{arm}/{seed}"
        if key in result:
            continue
        result[key] = evaluate_base(base)
        print(key, json.dumps(result[key]), flush=True)
        out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
