"""Markdown table of a policy's CAGE2 evaluation on CybORG beside the simulator and the
leaderboard, with the transfer check per red (|sim − CybORG| < 2 se + 1.0 at 100 steps), from the
JSON that `wfrl eval --cage2 --json` writes.

    .venv/bin/python scripts/cage2_markdown.py SIM.json CYBORG.json
"""
import argparse
import json
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sim", help="the simulator's JSON (wfrl eval --cage2 --backend sim --json)")
    ap.add_argument("cyborg", help="CybORG's JSON (wfrl eval --cage2 --backend cyborg --json)")
    a = ap.parse_args(argv)
    try:
        sim, cy = (json.load(open(p)) for p in (a.sim, a.cyborg))
    except (OSError, ValueError) as e:
        sys.exit(f"cage2_markdown: error: {e}")
    s_by = {(r["red_agent"], r["steps"]): r for r in sim["settings"]}
    print("| red agent | steps | CybORG mean ± sd (se) | compliance | simulator mean ± sd | "
          "winner | best entry | CybORG beats the winner |")
    print("|---|---|---|---|---|---|---|---|")
    for r in cy["settings"]:
        s = s_by[(r["red_agent"], r["steps"])]
        comp = "n/a (no fix)" if r["compliance"] is None else f"{r['compliance']:.3f}"
        beats = "" if r["red_agent"] == "SleepAgent" or r["winner"] is None else \
            ("yes" if r["mean"] > r["winner"] else "no")   # (winner: measured on that code)
        print(f"| {r['red_agent']} | {r['steps']} | {r['mean']:.2f} ± {r['sd']:.2f} ({r['se']:.2f}) "
              f"| {comp} | {s['mean']:.2f} ± {s['sd']:.2f} | {r['winner']} | {r['best_entry']} | {beats} |")
    print(f"\nTotal (sum of the nine means): CybORG {cy['total']:.2f} ± {cy['total_ci95']:.2f} (95 %), "
          f"simulator {sim['total']:.2f} ± {sim['total_ci95']:.2f}; leaderboard winner "
          f"{cy['leaderboard_winner_total']} ± 0.43. {cy['episodes']} episodes per setting, "
          f"{cy['policy']} policy, seed {cy['seed']}.\n")
    print("Transfer at 100 steps (simulator − CybORG, against 2 se + 1.0):")
    for red in ("B_lineAgent", "RedMeanderAgent", "SleepAgent"):
        a, b = s_by[(red, 100)], next(r for r in cy["settings"] if (r["red_agent"], r["steps"]) == (red, 100))
        diff = a["mean"] - b["mean"]
        bound = 2 * float(np.hypot(a["se"], b["se"])) + 1.0
        print(f"- {red}: {diff:+.2f} (bound {bound:.2f}) — {'holds' if abs(diff) < bound else 'FAILS'}")


if __name__ == "__main__":
    main()
