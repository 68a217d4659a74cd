"""The robustness table of docs/robustness.md from `wfrl eval --cage2 --reds family --out` results:
per policy, each red's 30/50/100-step means ± se and each variant's drop from its base red at the
same length; and, for pairs of policies with --episodes-out records, the paired difference over
the held-out reds (wfrl.evaluation.cage2.compare_episodes).

    python experiments/robustness_table.py NAME=RESULT.json[,MORE.json] [NAME=...] \
        [--pair A=a.jsonl[,a2.jsonl] B=b.jsonl[,b2.jsonl]] [--heldout RED,RED,...]

A policy's results may come in several files (runs over different reds on the same episodes):
their settings are taken together, and so are the pairs of episode records, file by file.
"""
from __future__ import annotations

import argparse
import json
import math

from wfrl.evaluation.cage2 import compare_episodes, robustness_rows


def table(results: dict) -> str:
    names = list(results)
    reds = []
    for res in results.values():
        for s in res["settings"]:
            if s["red_agent"] not in reds:
                reds.append(s["red_agent"])
    lines = ["| red | steps | " + " | ".join(f"{n} (drop)" for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    drops = {n: {(r["red_agent"], r["steps"]): r for r in robustness_rows(res)}
             for n, res in results.items()}
    means = {n: {(s["red_agent"], s["steps"]): s for s in res["settings"]}
             for n, res in results.items()}
    for red in reds:
        for steps in (30, 50, 100):
            cells = []
            for n in names:
                s = means[n].get((red, steps))
                if s is None:
                    cells.append("")
                    continue
                d = drops[n].get((red, steps))
                cells.append(f"{s['mean']:.2f} ± {s['se']:.2f}"
                             + (f" ({d['drop']:+.2f})" if d else ""))
            lines.append(f"| {red} | {steps} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def heldout_pair(path_a: str, path_b: str, reds, steps: int = 100) -> dict:
    """Paired A − B over the held-out reds at `steps`: the mean of their per-red differences and
    its standard error."""
    rows = []
    for pa, pb in zip(path_a.split(","), path_b.split(","), strict=True):
        rows += [r for r in compare_episodes(pa, pb)["settings"]
                 if r["red_agent"] in reds and r["steps"] == steps]
    k = len(rows)
    return {"reds": [r["red_agent"] for r in rows], "steps": steps,
            "mean_a": round(sum(r["mean_a"] for r in rows) / k, 4),
            "mean_b": round(sum(r["mean_b"] for r in rows) / k, 4),
            "diff": round(sum(r["diff"] for r in rows) / k, 4),
            "diff_se": round(math.sqrt(sum(r["diff_se"] ** 2 for r in rows)) / k, 4),
            "per_red": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="NAME=RESULT.json")
    ap.add_argument("--pair", nargs=2, default=None, metavar=("A=a.jsonl", "B=b.jsonl"))
    from wfrl.envs.reds import POOLS
    ap.add_argument("--heldout", default=",".join(POOLS["family-heldout"]))
    a = ap.parse_args(argv)
    results = {}
    for spec in a.results:
        name, _, paths = spec.partition("=")
        for path in paths.split(","):
            with open(path) as f:
                res = json.load(f)
            if name in results:
                results[name]["settings"] += res["settings"]
            else:
                results[name] = res
    print(table(results))
    if a.pair:
        (na, pa), (nb, pb) = (p.partition("=")[::2] for p in a.pair)
        h = heldout_pair(pa, pb, a.heldout.split(","))
        print(f"\nheld-out reds at {h['steps']} steps ({', '.join(h['reds'])}), paired: {na} "
              f"{h['mean_a']:.2f}, {nb} {h['mean_b']:.2f}, {na} − {nb} = {h['diff']:+.2f} ± "
              f"{h['diff_se']:.2f}")
        for r in h["per_red"]:
            print(f"  {r['red_agent']}: {r['diff']:+.2f} ± {r['diff_se']:.2f} ({r['n']} pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
