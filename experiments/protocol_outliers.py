"""Per-episode returns of one CAGE2 protocol setting, played as `wfrl eval --cage2` plays it (seed
153, 1,000 greedy episodes, the same episode numbers): the eight worst CybORG episodes beside the
same episodes on the simulator, and the CybORG mean without the worst ones.

    .venv/bin/python experiments/protocol_outliers.py CHECKPOINT B_lineAgent 50   # ≈ 4 min, 2 processes
    .venv/bin/python experiments/protocol_outliers.py CHECKPOINT RedMeanderAgent 100 leaderboard
        # the same on sim:leaderboard and cyborg:leaderboard
"""
import concurrent.futures as cf
import multiprocessing as mp
import sys

import numpy as np

import wfrl.evaluation.cage2 as ce
from wfrl.evaluation.screen import first_episode


def main():
    ckpt, red, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    code = ":leaderboard" if sys.argv[4:5] == ["leaderboard"] else ""
    policy = ce.policy_of_checkpoint(ckpt)
    base = first_episode(red, steps)

    def tasks(backend, chunk):
        return [ce.EpisodeTask(backend, red, steps, *policy, 153, base + f, min(chunk, 1000 - f), True)
                for f in range(0, 1000, chunk)]
    out = {}
    for backend, chunk in (("sim", 1000), ("cyborg", 50)):
        with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
            res = list(pool.map(ce.run_task, tasks(backend + code, chunk)))
        out[backend] = (np.concatenate([r[0] for r in res]), np.concatenate([r[1] for r in res]),
                        np.concatenate([r[3] for r in res]))
        print(backend, "mean", out[backend][0].mean(), "sd", out[backend][0].std(ddof=1), flush=True)
    cy, sim = out["cyborg"], out["sim"]
    order = np.argsort(cy[0])
    for i in order[:8]:
        print(f"episode {base + i}: cyborg {cy[0][i]:.1f} (fixes {cy[1][i]}, compliance {cy[2][i]:.2f})  sim {sim[0][i]:.1f} (fixes {sim[1][i]}, compliance {sim[2][i]:.2f})")
    print("cyborg without the worst:", np.delete(cy[0], order[:1]).mean(), " without the 3 worst:", np.delete(cy[0], order[:3]).mean())


if __name__ == "__main__":
    main()
