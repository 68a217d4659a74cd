"""How many episodes a run needs to beat the CAGE2 winner like for like: every periodic policy
of each run (RUN/evals/ep_N.pt, in order) played greedily on B_line-100 and Meander-100 (the
CAGE2 protocol's episodes under --seed, --episodes per setting) on --backend, until the first
whose two means reach the line (default: the winner's installed-code figures the recipe is
held to, B_line-100 ≥ −14.0 and Meander-100 ≥ −16.77). Prints, per run, that policy's episodes,
its two means ± se, and the seconds the run took to reach it at its own average rate
(summary.json's wall time over its episodes); with --json, the whole table.

    python experiments/time_to_line.py RUN [RUN ...] [--backend sim] [--episodes 1000]
        [--seed 153] [--bline -14.0] [--meander -16.77] [--start N] [--json OUT]

--start N plays only the policies from N episodes on: to confirm on CybORG, from the one before
the simulator's crossing, a line the simulator found.
"""
import argparse
import json
import pathlib
import re

from wfrl.evaluation.cage2 import cage2_evaluate


def first_crossing(run: pathlib.Path, backend: str, episodes: int, seed: int, bline: float,
                   meander: float, start: int = 0) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    rate = summary["episodes"] / summary["wall_time_s"]
    tried = []
    for ck in sorted((run / "evals").glob("ep_*.pt")):
        n = int(re.search(r"ep_(\d+)", ck.name).group(1))
        if n < start:
            continue
        res = cage2_evaluate({"all": str(ck)}, backend=backend, episodes=episodes, seed=seed,
                             reds=("B_lineAgent", "RedMeanderAgent"), lengths=(100,), n_workers=1)
        by = {s["red_agent"]: s for s in res["settings"]}
        b, m = by["B_lineAgent"], by["RedMeanderAgent"]
        tried.append({"episodes": n, "bline": b["mean"], "bline_se": b["se"],
                      "meander": m["mean"], "meander_se": m["se"]})
        if b["mean"] >= bline and m["mean"] >= meander:
            return {"run": str(run), "crossed": True, "seconds": round(n / rate, 1),
                    **tried[-1], "tried": tried}
    return {"run": str(run), "crossed": False, "tried": tried}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--backend", default="sim")
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=153)
    ap.add_argument("--bline", type=float, default=-14.0)
    ap.add_argument("--meander", type=float, default=-16.77)
    ap.add_argument("--start", type=int, default=0, metavar="N",
                    help="play only the policies from N episodes on")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    out = []
    for run in a.runs:
        r = first_crossing(pathlib.Path(run), a.backend, a.episodes, a.seed, a.bline, a.meander,
                           a.start)
        out.append(r)
        if r["crossed"]:
            print(f"{run}: {r['episodes']} episodes ({r['seconds']} s at its rate): B_line-100 "
                  f"{r['bline']:.2f} ± {r['bline_se']:.2f}, Meander-100 {r['meander']:.2f} ± "
                  f"{r['meander_se']:.2f}", flush=True)
        else:
            print(f"{run}: no policy reached the line", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
