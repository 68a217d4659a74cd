"""Record the parity suite's CybORG reference episodes into tests/data/cyborg_parity.npz.

CybORG is deterministic given the seeds (episode i of a pair uses SeedSequence([REFERENCE_SEED, i])),
so the episodes the parity suite compares the simulator against can be played once and kept:
per episode the return, the step of the first Impact, the steps spent at each red-access level per
host, the observation-bit counts per tenth of the episode and a 64-bit digest of the whole
trajectory; for B_line against a sleeping blue also the full rewards and observations. Every test
run then compares the simulator against all of them, and tests/test_parity.py replays a sample
live and requires each replayed episode to match its record exactly.

    .venv/bin/python scripts/record_parity.py                 # record (≈ 6,200 episodes, 2 processes)
    .venv/bin/python scripts/record_parity.py --check 0.05    # replay 5 % and compare, write nothing
    .venv/bin/python scripts/record_parity.py --reference leaderboard   # the leaderboard's code
    .venv/bin/python scripts/record_parity.py --reference family --reds ScoutingB_lineAgent
        # play only these reds' episodes; the file's other pairs are kept as recorded (the
        # episodes are a function of the seeds, so they are what a full recording would hold)

Recorded on the project's 2-core VM with csle-cyborg 0.0.3 (≈ 16 min; the leaderboard's
reference, 2,400 episodes of the two policies that restore hosts, in tests/data/
cyborg_parity_leaderboard.npz).
"""
import argparse
import fcntl
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np

from wfrl.tools.parity import (
    FULL_TRAJECTORY_PAIR,
    REFERENCE_SEED,
    REFERENCE_VERSION,
    REFERENCES,
    concat_records,
    load_reference,
    pair_key,
    run_episodes,
    save_reference,
    summarise,
)

DATA = os.path.join(os.path.dirname(__file__), "..", "tests", "data")
CHUNK = 50


def _chunk(backend, red, policy, start, n):
    from wfrl.envs import make_backend
    from wfrl.envs.base import is_leaderboard
    return red, policy, start, run_episodes(make_backend(backend, red), policy, n,
                                            REFERENCE_SEED, start, is_leaderboard(backend))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", default="installed", choices=sorted(REFERENCES),
                    help="installed: the installed CybORG (tests/data/cyborg_parity.npz); "
                         "leaderboard: played by the code the CAGE2 leaderboard was scored on")
    ap.add_argument("--out", default=None, help="default: tests/data/<the reference's file>")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--check", type=float, default=None, metavar="FRACTION",
                    help="replay this fraction of each pair's recorded episodes and compare")
    ap.add_argument("--reds", default=None, metavar="RED,...",
                    help="play only these reds of the reference and keep the rest of the file")
    a = ap.parse_args(argv)
    ref = REFERENCES[a.reference]
    a.out = a.out or os.path.join(DATA, ref.file)
    if a.check is not None:
        return _check(a)
    # one recording of a file at a time, from before it is read: a second would write back
    # without the first's pairs
    import hashlib
    import tempfile
    key = hashlib.sha1(os.path.abspath(a.out).encode()).hexdigest()[:16]
    lock = open(os.path.join(tempfile.gettempdir(), f"wfrl-record-{key}.lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        ap.error(f"{a.out} is being recorded by another run")
    play = ref.reds
    kept: dict = {}
    kept_full: dict = {}
    if a.reds:
        play = tuple(a.reds.split(","))
        unknown = [r for r in play if r not in ref.reds]
        if unknown:
            ap.error(f"not reds of the {a.reference} reference: {', '.join(unknown)}")
        if os.path.exists(a.out):
            old, kept, kept_full = load_reference(a.out)
            from importlib.metadata import version
            want = {"version": REFERENCE_VERSION, "seed": REFERENCE_SEED,
                    "episodes": ref.episodes, "backend": ref.backend,
                    "csle_cyborg": version("csle-cyborg")}
            differ = [k for k, v in want.items() if old.get(k) != v]
            if differ:
                ap.error(f"{a.out} was not recorded by this protocol ({', '.join(differ)} "
                         "differ): record the whole reference")
        missing = [r for r in ref.reds if r not in play and
                   any(pair_key(r, p) not in kept for p in ref.policies)]
        if missing:
            ap.error(f"{a.out} lacks {', '.join(missing)}: record them too")
    tasks = [(ref.backend, red, pol, s, min(CHUNK, ref.episodes[pol] - s))
             for red in play for pol in ref.policies
             for s in range(0, ref.episodes[pol], CHUNK)]
    parts = {}
    t0 = time.time()
    with ProcessPoolExecutor(a.workers, mp_context=get_context("spawn")) as pool:
        for red, pol, start, rec in pool.map(_chunk, *zip(*tasks)):
            parts[(red, pol, start)] = rec
            print(f"{red}/{pol} {start}+{rec.n}  ({time.time() - t0:.0f} s)", flush=True)
    summaries = {pair_key(r, p): kept[pair_key(r, p)] for r in ref.reds if r not in play
                 for p in ref.policies}
    # full trajectories kept as recorded (the file holds reward tenths)
    full = {k: (t / 10.0, o) for k, (t, o) in kept_full.items() if k in summaries}
    for red in play:
        for pol in ref.policies:
            rec = concat_records([parts[(red, pol, s)]
                                  for s in range(0, ref.episodes[pol], CHUNK)])
            summaries[pair_key(red, pol)] = summarise(rec)
            if (red, pol) == FULL_TRAJECTORY_PAIR:
                full[pair_key(red, pol)] = (rec.rewards, rec.obs)
    from importlib.metadata import version
    meta = {"version": REFERENCE_VERSION, "seed": REFERENCE_SEED, "episodes": ref.episodes,
            "reds": list(ref.reds), "csle_cyborg": version("csle-cyborg"),
            "backend": ref.backend, "seconds": round(time.time() - t0),
            "command": "python scripts/record_parity.py --reference " + a.reference
                       + (f" --reds {a.reds}" if a.reds else "")}
    save_reference(a.out, summaries, full, meta)
    print(f"wrote {a.out} ({os.path.getsize(a.out) / 1e3:.0f} kB) in {time.time() - t0:.0f} s")
    return 0


def _check(a):
    ref = REFERENCES[a.reference]
    meta, summaries, _ = load_reference(a.out)
    rng = np.random.default_rng()
    tasks = []
    for red in ref.reds:
        for pol in ref.policies:
            n = ref.episodes[pol]
            for i in rng.choice(n, max(1, int(round(a.check * n))), replace=False):
                tasks.append((ref.backend, red, pol, int(i), 1))
    bad = 0
    with ProcessPoolExecutor(a.workers, mp_context=get_context("spawn")) as pool:
        for red, pol, i, rec in pool.map(_chunk, *zip(*tasks)):
            ok = summarise(rec).digest[0] == summaries[pair_key(red, pol)].digest[i]
            bad += not ok
            if not ok:
                print(f"MISMATCH {red}/{pol} episode {i}")
    print(f"{len(tasks) - bad}/{len(tasks)} replayed episodes match the record")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
