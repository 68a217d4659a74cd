"""The compiled CAGE2 simulator (csrc/wfrl_cage2.h) behind the wfrl backend contract.

Same observation, actions, reward, red agents and bugs as CybORG (held statistically equal
by tests/test_parity.py), at a few hundred nanoseconds per step. Randomness is the env's own
xoshiro256** state: `seed` alone fixes an episode, and envs never share state.
"""
from __future__ import annotations

import os

from wfrl.envs.base import check_red_agent


def next_episode_seed(seed: int) -> int:
    """The seed of the episode after the one seeded with `seed` (a 64-bit LCG step), so that an
    env reset without a seed continues deterministically. Twin of wfrl_next_episode_seed
    (csrc/wfrl_vec.h), which the vector env uses for the same chain per env."""
    return (int(seed) * 6364136223846793005 + 1442695040888963407) % 2**64


class SimBackend:
    """One compiled CAGE2 env (the batched form is wfrl._core.Cage2Sim itself)."""

    def __init__(self, red_agent: str = "B_lineAgent", seed: int | None = None,
                 leaderboard: bool = False, external: bool = False):
        from wfrl._core import Cage2Sim, SimSlots
        self.red_agent = check_red_agent(red_agent)
        self.leaderboard = bool(leaderboard)   # the leaderboard's CybORG code (envs.base.BACKENDS)
        # stepped from Python (gymnasium, parity); external: red is given its actions from
        # outside (wfrl.envs.duel)
        self.sim = Cage2Sim(1, red_agent, leaderboard, external)
        self.slots = SimSlots(1, red_agent, leaderboard)  # whole episodes in the compiled loop
        self.red = self.slots.red    # a learned red's network (learned:PATH), else None
        self.population = self.slots.population   # population:PATH's members, else None
        self._next_seed: int   # set by seed()
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self._next_seed = int(seed) % 2**64

    def take_episode_seed(self) -> int:
        """The seed of the episode about to start; the next one continues the chain from it."""
        seed = self._next_seed
        self._next_seed = next_episode_seed(seed)
        return seed

    def reset(self):
        seed = self.take_episode_seed()
        if self.population is not None:   # the member the seed draws (the Python twin's draw)
            k = self.population.spec.member(seed)
            self.red = self.population.reds[k]
            out = self.sim.reset(0, seed, self.population.kinds[k])
        else:
            out = self.sim.reset(0, seed)
        if self.red is not None:
            self.sim.seed_red(0, seed)
        return out

    def step(self, action: int):
        if self.red is not None:    # the learned red chooses, as in the compiled loop
            self.sim.act_red(0, self.red)
        return self.sim.step(0, int(action))

    def last_red_action(self):
        """Red's action in the last step: (name, target, success) (wfrl.envs.base.RED_ACTIONS)."""
        from wfrl.envs.actions import HOSTS
        from wfrl.envs.base import RED_ACTIONS, RED_SUBNETS
        kind, target, ok = self.sim.last_red_action(0)
        where = "" if kind == 0 else (RED_SUBNETS[target] if kind == 1 else HOSTS[target])
        return RED_ACTIONS[kind], where, bool(ok)

    def decoys(self):
        """Decoys in place per host (uint8[13], bit k: wfrl.envs.actions.DECOY_KINDS[k])."""
        return self.sim.decoys(0)

    def close(self) -> None:
        pass
