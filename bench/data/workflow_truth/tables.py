"""Markdown tables of the ground truth's analyses (analysis.json of each red and code), as
docs/findings.md shows them.

    python bench/data/workflow_truth/tables.py bench/data/workflow_truth

The per-workflow check's agreement with the conditioned truth (rank correlation, spread, and the
marginal effect of each of the ten relations in both tables):

    python bench/data/workflow_truth/tables.py bench/data/workflow_truth/sim \
        --per-workflow bench/data/workflow_truth/per_workflow_sim/per_workflow.csv \
        --json bench/data/workflow_truth/per_workflow_sim/agreement.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

CODES = (("sim", "installed CybORG code"), ("sim_leaderboard", "leaderboard's CybORG code"))
REDS = (("B_lineAgent", "B_line-100"), ("RedMeanderAgent", "Meander-100"),
        ("mean_of_reds", "mean of both"))


def fmt_p(p):
    return "—" if p is None else (f"{p:.2g}" if p >= 1e-4 else f"{p:.0e}")


def analyses(root: Path):
    """(code name, red name, analysis) for every analysis.json under root, in table order."""
    for code, code_name in CODES:
        for red, red_name in REDS:
            path = root / code / red / "analysis.json"
            if path.exists():
                yield code_name, red_name, json.loads(path.read_text())


def effect_table(root: Path) -> str:
    lines = ["| code | red | runs | followable | F (p) | Friedman p | workflow sd (95 % bound) | "
             "run sd: residual / raw | best followable (reward ± se) | tied with best |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for code_name, red_name, a in analyses(root):
        e = a["effect_followable"] or a["effect"]
        best = a["best"]
        lines.append(
            f"| {code_name} | {red_name} | {a['runs']} | {a['feasibility']['followable']} | "
            f"{e['F']:.2f} ({fmt_p(e['p_value'])}) | {fmt_p(e['friedman_p_value'])} | "
            f"{e['workflow_sd']:.2f} (≤ {e['workflow_sd_upper95']:.2f}) | "
            f"{a['run_sd']['residual_sd']:.2f} / {a['run_sd']['raw_sd_mean']:.2f} | "
            f"{best['best']} ({best['best_reward']:.2f} ± {best['best_se']:.2f}) | "
            f"{best['indistinguishable']} of {best['followable'] - 1} |")
    return "\n".join(lines)


def relations_table(root: Path, key: str = "relations_reward", top: int = 3) -> str:
    lines = ["| code | red | relation | effect [95 % interval] | significant |",
             "|---|---|---|---|---|"]
    for code_name, red_name, a in analyses(root):
        for r in a[key][:top]:
            lines.append(f"| {code_name} | {red_name} | {r['relation']} | "
                         f"{r['effect']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}] | "
                         f"{'yes' if r['significant'] else 'no'} |")
    return "\n".join(lines)


def sentences(root: Path) -> str:
    return "\n".join(f"- **{red_name}, {code_name}**: {a['sentence']}"
                     for code_name, red_name, a in analyses(root))


def per_workflow_agreement(per_workflow_csv: Path, truth_dir: Path) -> dict:
    """The per-workflow check against the conditioned truth, per red: Spearman rank correlation
    of the sample's per-workflow means (over its seeds) with the truth's means, the mean
    difference (per-workflow − conditioned) with its SE over workflows, both tables' reward
    spread over the sample, whether each followability verdict agrees, and the two-way test
    (workflow × seed) on the per-workflow runs alone."""
    import csv
    import itertools

    import numpy as np
    from scipy.stats import spearmanr

    from wfrl.search.effects import before_matrix
    from wfrl.search.exhaustive import workflow_effect
    from wfrl.search.truth import matrices
    from wfrl.workflow import UNIT_TYPES
    rows = list(csv.DictReader(open(per_workflow_csv)))
    before = before_matrix()                    # [pair, workflow], combinations(UNIT_TYPES, 2)
    pairs = [f"{a} before {b}" for a, b in itertools.combinations(UNIT_TYPES, 2)]
    seed_dirs = sorted(d for d in Path(truth_dir).glob("seed*") if (d / "truth.csv").exists())
    out = {}
    for red in ("B_lineAgent", "RedMeanderAgent"):
        mine = [r for r in rows if r["Red"] == red]
        ids = sorted({int(r["Workflow_ID"]) for r in mine})
        have = {w: {int(r["Seed"]) for r in mine if int(r["Workflow_ID"]) == w} for w in ids}
        seeds = sorted(set.intersection(*have.values()))      # the seeds every workflow has
        full = ids
        y = np.array([[next(float(r["Reward"]) for r in mine if int(r["Workflow_ID"]) == w
                            and int(r["Seed"]) == s) for w in full] for s in seeds])
        c = np.array([[next(float(r["Compliance"]) for r in mine if int(r["Workflow_ID"]) == w
                            and int(r["Seed"]) == s) for w in full] for s in seeds])
        tr, tc = matrices(seed_dirs, red)
        t_mean, t_comp = tr.mean(axis=0)[full], tc.mean(axis=0)[full]
        d = y.mean(axis=0) - t_mean
        eff = workflow_effect(y) if len(seeds) >= 2 and len(full) >= 3 else None
        rho, rho_p = spearmanr(y.mean(axis=0), t_mean)
        relations = [_class_difference(before[k][full], y.mean(axis=0), t_mean, name)
                     for k, name in enumerate(pairs)]
        out[red] = {"workflows": len(full), "seeds": seeds,
                    "spearman": round(float(rho), 3), "spearman_p": float(rho_p),
                    "mean_difference": round(float(d.mean()), 3),
                    "mean_difference_se": round(float(d.std(ddof=1) / np.sqrt(len(d))), 3),
                    "per_workflow_spread_sd": round(float(y.mean(axis=0).std(ddof=1)), 3),
                    "truth_spread_sd": round(float(t_mean.std(ddof=1)), 3),
                    "followable_agrees": int(((c.mean(axis=0) >= 0.95) == (t_comp >= 0.95)).sum()),
                    "enterprise_before_user": relations[pairs.index("enterprise before user")],
                    "relations": relations,
                    "min_compliance": round(float(c.min()), 4),
                    "effect": eff}
    return out


def _class_difference(first, per_workflow, truth_means, relation: str) -> dict:
    """Mean reward of the sampled workflows where `first` holds (the relation "a before b")
    minus the mean of the others, per-workflow and in the conditioned truth, with Welch's 95 %
    interval over the per-workflow values (the marginal effect of the relation in the sample: a
    relation sharing a type with an effective one can show one too)."""
    import numpy as np
    from scipy import stats

    a, b = np.asarray(per_workflow)[first], np.asarray(per_workflow)[~first]
    se = float(np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
    df = se ** 4 / ((a.var(ddof=1) / len(a)) ** 2 / (len(a) - 1)
                    + (b.var(ddof=1) / len(b)) ** 2 / (len(b) - 1))
    half = float(stats.t.ppf(0.975, df)) * se
    d = float(a.mean() - b.mean())
    t = np.asarray(truth_means)
    return {"relation": relation,
            "n": [int(first.sum()), int((~first).sum())], "per_workflow": round(d, 3),
            "ci95": [round(d - half, 3), round(d + half, 3)],
            "conditioned": round(float(t[first].mean() - t[~first].mean()), 3),
            "significant": bool(d - half > 0 or d + half < 0)}


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", default="bench/data/workflow_truth", type=Path)
    p.add_argument("--per-workflow", type=Path, metavar="CSV",
                   help="instead: the per-workflow check's agreement with the truth in ROOT")
    p.add_argument("--json", type=Path, help="with --per-workflow: write the agreement here")
    a = p.parse_args(argv)
    if a.per_workflow:
        out = per_workflow_agreement(a.per_workflow, a.root)
        text = json.dumps(out, indent=1)
        if a.json:
            a.json.write_text(text + "\n")
        print(text)
        return 0
    root = a.root
    print(effect_table(root), "\n")
    print(relations_table(root), "\n")
    print(relations_table(root, "relations_compliance"), "\n")
    print(sentences(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
