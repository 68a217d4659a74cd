"""Plain-Python twins of csrc/wfrl_rng.h (splitmix64 seeding, xoshiro256**), and the derivation of
per-episode seeds. The rollout reference uses them to draw exactly what the compiled loop draws."""
from __future__ import annotations

import numpy as np

MASK = (1 << 64) - 1


def splitmix64(x: int) -> tuple[int, int]:
    """One splitmix64 step: returns (new state, output)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return x, z ^ (z >> 31)


class Xoshiro256:
    """xoshiro256** seeded like wfrl_rng_seed; uniform() and below(n) as in the C header."""

    def __init__(self, seed: int):
        x = seed & MASK
        self.s = []
        for _ in range(4):
            x, out = splitmix64(x)
            self.s.append(out)

    def next(self) -> int:
        s = self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & MASK  # noqa: E731
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform(self) -> float:
        return (self.next() >> 11) * 2.0 ** -53

    def below(self, n: int) -> int:
        return ((self.next() >> 32) * n) >> 32


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 output function applied elementwise (uint64, wrapping)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def episode_seeds(seed: int, episodes) -> tuple[np.ndarray, np.ndarray]:
    """(env seeds, action seeds), uint64 arrays, for global episode numbers `episodes` of a run.

    Derived from (seed, episode) only — not from the worker — so every collector produces the same
    episode for the same index whichever worker runs it.
    """
    e = np.atleast_1d(np.asarray(episodes, dtype=np.uint64))
    with np.errstate(over="ignore"):
        base = _mix(np.array([seed & MASK], dtype=np.uint64))[0]
        return _mix(base ^ _mix(e * np.uint64(2))), _mix(base ^ _mix(e * np.uint64(2) + np.uint64(1)))


# Reserved ranges of global episode numbers (their seeds come from episode_seeds). Training takes
# 0, 1, 2, … (no run comes near 10⁹ episodes); every kind of evaluation has a range of its own,
# so no evaluation episode shares its seeds with a training episode or with another evaluation.
EVAL_EPISODE_BASE = 1_000_000_000     # a trained policy's evaluation (search visits, exhaustive)
SELECT_EPISODE_BASE = 2_000_000_000   # the periodic greedy evaluation that keeps best.pt
CAGE2_EPISODE_BASE = 3_000_000_000    # the CAGE2 protocol table (wfrl.evaluation.cage2)
EPISODE_BLOCK = 1_000_000             # sub-ranges of a range: one per search visit / CAGE2 setting


def episode_block(base: int, k: int) -> int:
    """First episode number of sub-range k of the reserved range starting at `base`."""
    return base + k * EPISODE_BLOCK


LEARNER_SEED_STRIDE = 100_003  # learner seeds of a search: seed · stride (+ the visit number)


def learner_seed(seed: int, visit: int = 0) -> int:
    """torch seed of the learner that pretrains (visit 0) or starts visit `visit` of a search."""
    return seed * LEARNER_SEED_STRIDE + visit
