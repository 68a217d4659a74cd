"""The price of a workflow: per alignment weight λ and workflow class, the reward against the
compliance reached, from the tables experiments/price_of_workflow.sh wrote (one order-conditioned
recipe policy per λ and seed, every workflow evaluated on 200 reserved episodes).

    .venv/bin/python experiments/price_of_workflow.py runs/price docs/results/search/2026-11-26_price_of_workflow

Classes: the 60 workflows that put user before enterprise and the 60 that put enterprise first
(the relation that decides feasibility at λ = 30). Per class and λ: mean reward and compliance
over its workflows, per run, then mean and spread (sd) over runs. Writes price.json, price.md
(table), price.png and, per λ, the combined table with its workflow-effect test.
"""
import json
import sys
from pathlib import Path

import numpy as np

from wfrl.search.exhaustive import combine, load_exhaustive
from wfrl.workflow import UNIT_TYPES, Workflow

src, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
U, E = UNIT_TYPES.index("user"), UNIT_TYPES.index("enterprise")
user_first = np.array([Workflow.from_index(w).rank[U] < Workflow.from_index(w).rank[E]
                       for w in range(120)])
res = {}
for lam_dir in sorted((p for p in src.glob("lam*") if p.is_dir()), key=lambda p: float(p.name[3:])):
    lam = float(lam_dir.name[3:])
    runs = sorted(lam_dir.glob("seed*/exhaustive.csv"))
    tables = [{r["Workflow_ID"]: r for r in load_exhaustive(p)} for p in runs]
    R = np.array([[t[w]["Reward"] for w in range(120)] for t in tables])
    C = np.array([[t[w]["Compliance"] for w in range(120)] for t in tables])
    (out / lam_dir.name).mkdir(exist_ok=True)
    combine(runs, out / lam_dir.name / "exhaustive.csv")
    effect = json.loads((out / lam_dir.name / "workflow_effect.json").read_text())
    entry = {"runs": len(runs), "workflow_effect_reward_F": effect["F"],
             "workflow_effect_reward_p": effect["p_value"],
             "feasible_per_run": [int((c >= 0.95).sum()) for c in C]}
    for name, mask in (("user_before_enterprise", user_first),
                       ("enterprise_before_user", ~user_first)):
        r_runs, c_runs = R[:, mask].mean(axis=1), C[:, mask].mean(axis=1)
        entry[name] = {"reward": float(r_runs.mean()), "reward_sd_runs": float(r_runs.std(ddof=1)),
                       "compliance": float(c_runs.mean()),
                       "compliance_sd_runs": float(c_runs.std(ddof=1)),
                       "reward_per_run": r_runs.round(3).tolist(),
                       "compliance_per_run": c_runs.round(4).tolist(),
                       "best_workflow_reward": float(R[:, mask].mean(axis=0).max())}
    entry["price_of_user_first"] = (entry["enterprise_before_user"]["reward"]
                                    - entry["user_before_enterprise"]["reward"])
    res[lam] = entry
(out / "price.json").write_text(json.dumps(res, indent=1))

lines = ["| λ | runs | class | reward (sd over runs) | compliance (sd over runs) | feasible (≥ 0.95) per run | workflow effect on reward (F, p) |",
         "|---|---|---|---|---|---|---|"]
for lam, e in res.items():
    for name in ("enterprise_before_user", "user_before_enterprise"):
        c = e[name]
        lines.append(f"| {lam:g} | {e['runs']} | {name.replace('_', ' ')} | {c['reward']:.2f} "
                     f"({c['reward_sd_runs']:.2f}) | {c['compliance']:.3f} "
                     f"({c['compliance_sd_runs']:.3f}) | {e['feasible_per_run']} | "
                     f"{e['workflow_effect_reward_F']}, {e['workflow_effect_reward_p']:.3g} |")
(out / "price.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))

import matplotlib  # noqa: E402  (the figure after the table)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(8, 5))
for k, (name, marker) in enumerate((("enterprise_before_user", "o"), ("user_before_enterprise", "s"))):
    xs = [res[l][name]["compliance"] for l in res]
    ys = [res[l][name]["reward"] for l in res]
    ax.errorbar(xs, ys, xerr=[res[l][name]["compliance_sd_runs"] for l in res],
                yerr=[res[l][name]["reward_sd_runs"] for l in res], fmt=marker + "-", color=f"C{k}",
                label=name.replace("_", " ") + " (60 workflows)")
    for l, x, y in zip(res, xs, ys):
        ax.annotate(f"λ={l:g}", (x, y), xytext=(5, 4), textcoords="offset points", fontsize=8)
ax.axvline(0.95, color="k", lw=0.8, ls="--")
ax.set_xlabel("mean compliance of the class (sd over runs)")
ax.set_ylabel("mean env reward per B_line episode (sd over runs)")
ax.set_title(f"The price of a workflow: reward vs compliance by alignment weight λ\n"
             f"({list(res.values())[0]['runs']} conditioned training runs per λ, 200 episodes per workflow)")
ax.legend(fontsize=8)
fig.savefig(out / "price.png", dpi=110, bbox_inches="tight")
