"""The belief ablation's table: for every `NAME.cage2.json` or `NAME.json` in a directory (a
`wfrl eval --cage2 --json` record), B_line-100 and Meander-100 mean ± se, the lowest compliance and the nine-setting
total, with each variant's mean over its seeds (runs named VARIANT_sSEED).
    python experiments/belief_table.py DIR"""
import glob
import json
import os
import re
import sys
from collections import defaultdict


def rows(directory):
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        d = json.load(open(path))
        by = {(s["red_agent"], s["steps"]): s for s in d["settings"]}
        name = os.path.basename(path).removesuffix(".json").removesuffix(".cage2")
        yield name, by[("B_lineAgent", 100)], by[("RedMeanderAgent", 100)], d["total"], min(
            s["compliance"] for s in d["settings"] if s["fixes_per_episode"] > 0)


def main(directory):
    groups = defaultdict(list)
    lines = []
    for name, b, m, total, comp in rows(directory):
        variant = re.sub(r"_s\d+$", "", name)
        groups[variant].append((b["mean"], m["mean"], total))
        lines.append(f"| {name} | {b['mean']:.2f} ± {b['se']:.2f} | {m['mean']:.2f} ± {m['se']:.2f}"
                     f" | {total:.2f} | {comp:.3f} |")
    print("| run | B_line-100 | Meander-100 | total (9 settings) | min compliance |")
    print("|---|---|---|---|---|")
    print("\n".join(lines))
    print()
    print("| variant | runs | B_line-100 | Meander-100 | total |")
    print("|---|---|---|---|---|")
    for v, g in sorted(groups.items()):
        n = len(g)
        print(f"| {v} | {n} | {sum(x[0] for x in g) / n:.2f} | {sum(x[1] for x in g) / n:.2f} | "
              f"{sum(x[2] for x in g) / n:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
