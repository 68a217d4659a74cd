"""The compiled CAGE2 simulator (csrc/wfrl_cage2.h) behind the wfrl backend contract.

Same observation, actions, reward, red agents and bugs as CybORG (held statistically equal
by tests/test_parity.py), at a few hundred nanoseconds per step. Randomness is the env's own
xoshiro256** state: `seed` alone fixes an episode, and envs never share state.
"""
from __future__ import annotations

import os

from wfrl.envs.base import check_red_agent


class SimBackend:
    """One compiled CAGE2 env (the batched form is wfrl._core.Cage2Sim itself)."""

    def __init__(self, red_agent: str = "B_lineAgent", seed: int | None = None):
        from wfrl._core import Cage2Sim, SimSlots
        self.red_agent = check_red_agent(red_agent)
        self.sim = Cage2Sim(1, red_agent)      # stepped from Python (gymnasium, parity)
        self.slots = SimSlots(1, red_agent)    # whole episodes in the compiled rollout loop
        self._next_seed = None
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self._next_seed = int(seed) % 2**64

    def reset(self):
        seed = self._next_seed
        # The next episode without an explicit seed continues deterministically from this one.
        self._next_seed = (seed * 6364136223846793005 + 1442695040888963407) % 2**64
        return self.sim.reset(0, seed)

    def step(self, action: int):
        return self.sim.step(0, int(action))

    def close(self) -> None:
        pass
