"""Greedy simulator returns of a checkpoint on the CAGE2 protocol's own episodes, in numbers far
beyond the protocol's 1,000: the screen for rare catastrophic episodes that
`scripts/select_checkpoint.py` runs before a policy is shipped."""
import numpy as np

import wfrl.evaluation.cage2 as ce


def first_episode(red: str, steps: int) -> int:
    """The first episode number of a protocol setting, as `wfrl eval --cage2` (every red and
    length) numbers them."""
    settings = [(r, s) for r in ce.CAGE2_REDS for s in ce.CAGE2_LENGTHS]
    return ce.episode_block(ce.CAGE2_EPISODE_BASE, settings.index((red, steps)))


def returns(ckpt, red: str, steps: int, n: int, seed: int = 153, backend: str = "sim") -> np.ndarray:
    """n greedy returns of a checkpoint in one protocol setting (the setting's episode numbers
    under `seed`, as `wfrl eval --cage2 --seed` numbers them); backend sim or sim:leaderboard."""
    policy = ce.policy_of_checkpoint(ckpt)
    base = first_episode(red, steps)
    out = [ce.run_task(ce.EpisodeTask(backend, red, steps, *policy, seed, base + f, min(1000, n - f),
                                 True))[0] for f in range(0, n, 1000)]
    return np.concatenate(out)
