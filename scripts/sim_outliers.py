"""How often a policy fails catastrophically on the simulator in one CAGE2 protocol setting: N greedy
episodes played as `wfrl eval --cage2` plays them (seed 153, the setting's episode numbers, N may
exceed the protocol's 1,000), the count of episodes below a threshold and the worst ones.

    .venv/bin/python scripts/sim_outliers.py CHECKPOINT B_lineAgent 50 20000 [-100]
"""
import sys

import numpy as np

import wfrl.cage2_eval as ce


def first_episode(red: str, steps: int) -> int:
    """The first episode number of a protocol setting, as `wfrl eval --cage2` (every red and
    length) numbers them."""
    settings = [(r, s) for r in ce.CAGE2_REDS for s in ce.CAGE2_LENGTHS]
    return ce.episode_block(ce.CAGE2_EPISODE_BASE, settings.index((red, steps)))


def returns(ckpt, red: str, steps: int, n: int, seed: int = 153, backend: str = "sim") -> np.ndarray:
    """n greedy simulator returns of a checkpoint in one protocol setting (the setting's episode
    numbers under `seed`, as `wfrl eval --cage2 --seed` numbers them); backend sim or
    sim:leaderboard."""
    policy = ce.policy_of_checkpoint(ckpt)
    base = first_episode(red, steps)
    out = [ce._run_task(ce._Task(backend, red, steps, *policy, seed, base + f, min(1000, n - f),
                                 True))[0] for f in range(0, n, 1000)]
    return np.concatenate(out)


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
