"""How often a policy fails catastrophically on the simulator in one CAGE2 protocol setting: N greedy
episodes played as `wfrl eval --cage2` plays them (seed 153, the setting's episode numbers, N may
exceed the protocol's 1,000), the count of episodes below a threshold and the worst ones.

    .venv/bin/python experiments/sim_outliers.py CHECKPOINT B_lineAgent 50 20000 [-100]
"""
import sys

import numpy as np

from wfrl.evaluation.screen import first_episode, returns


def main():
    ckpt, red, steps, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    below = float(sys.argv[5]) if len(sys.argv) > 5 else -100.0
    base = first_episode(red, steps)
    ret = returns(ckpt, red, steps, n)
    bad = np.flatnonzero(ret < below)
    print(f"{ckpt} sim {red} {steps} steps, {n} episodes from {base}: mean {ret.mean():.3f} "
          f"sd {ret.std(ddof=1):.3f}; below {below}: {len(bad)} "
          f"({len(bad) / n:.4%}); worst: "
          + ", ".join(f"{base + i}: {ret[i]:.1f}" for i in np.argsort(ret)[:5]))


if __name__ == "__main__":
    main()
