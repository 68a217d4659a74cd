"""Markdown tables of several CAGE2 evaluations side by side (`wfrl eval --cage2 --json`, same
backend, episodes and seed): per setting each one's mean ± se and compliance, and each one's
distance to the first (its mean minus the first's, with the se of the difference); then, for
the 100-step B_line and Meander settings of evaluations run with `--attribute`, where the cost
comes from per host and per cause.

    .venv/bin/python scripts/compare_cage2.py bound=BOUND.json shipped=SHIPPED.json
"""
import argparse
import json
import math
import sys
from pathlib import Path

from wfrl.evaluation.attribution import HOST_NAMES

CAUSES = ("privileged", "restore", "impact", "other")


def _load(spec: str) -> tuple[str, dict]:
    label, sep, path = spec.partition("=")
    if not sep or not label or not path:
        sys.exit(f"compare_cage2: error: {spec!r} is not LABEL=FILE")
    try:
        return label, json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"compare_cage2: error: {path}: {e}")


def _cell(v: dict) -> str:
    return f"{v['mean']:.2f} ± {v['se']:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("evaluations", nargs="+", metavar="LABEL=FILE")
    a = ap.parse_args(argv)
    runs = dict(_load(s) for s in a.evaluations)
    labels = list(runs)
    first = runs[labels[0]]
    for label, res in runs.items():
        for key in ("backend", "episodes", "seed"):
            if res.get(key) != first.get(key):
                sys.exit(f"compare_cage2: error: {label} has {key} {res.get(key)!r}, "
                         f"{labels[0]} has {first.get(key)!r}")
    by = {label: {(r["red_agent"], r["steps"]): r for r in res["settings"]}
          for label, res in runs.items()}
    keys = [k for k in by[labels[0]] if k[0] != "SleepAgent" and all(k in by[x] for x in labels)]
    print(f"{first['backend']}, {first['episodes']} episodes per setting, seed {first['seed']}\n")
    head = ["red agent", "steps"] + [f"{x} (compliance)" for x in labels] + \
        [f"{x} − {labels[0]}" for x in labels[1:]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for k in keys:
        rows = [by[x][k] for x in labels]
        cells = [k[0], str(k[1])]
        for r in rows:
            comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
            cells.append(f"{r['mean']:.2f} ± {r['se']:.2f} ({comp})")
        for r in rows[1:]:
            d = r["mean"] - rows[0]["mean"]
            cells.append(f"{d:+.2f} ± {math.hypot(r['se'], rows[0]['se']):.2f}")
        print("| " + " | ".join(cells) + " |")
    for k in keys:
        if k[1] != 100 or not all("cost" in by[x][k] for x in labels):
            continue
        costs = [by[x][k]["cost"] for x in labels]
        print(f"\nWhere the cost comes from, {k[0]}-{k[1]} (mean per episode ± se):\n")
        print("| host or cause | " + " | ".join(labels) + " |")
        print("|---|" + "---|" * len(labels))
        for h in HOST_NAMES:
            vals = [c["by_host"][h]["total"] for c in costs]
            if any(abs(v["mean"]) >= 0.005 for v in vals):
                print(f"| {h} | " + " | ".join(_cell(v) for v in vals) + " |")
        for cause in CAUSES:
            vals = [c["by_cause"][cause] for c in costs]
            if cause != "other" or any(v["mean"] for v in vals):
                print(f"| all hosts: {cause} | " + " | ".join(_cell(v) for v in vals) + " |")
        print("| total | " + " | ".join(_cell(c["total"]) for c in costs) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
