"""Red agents beyond CAGE2's two: variants of B_line and Meander that change when red acts and how
much it scans, as CybORG red agent classes (their twins: the red variants of the compiled
simulator, csrc/wfrl_cage2.h, WFRL_RED_VARIANT_SHIFT).

Each variant wraps an instance of the CAGE2 agent it varies and leaves its decisions alone
(what each does differently and why a defender might fail against it: docs/robustness.md):

- `DelayedB_lineAgent`, `DelayedMeanderAgent`: red sleeps the first D steps (D uniform in
  5..25), then attacks as the base agent;
- `BurstyB_lineAgent`, `BurstyMeanderAgent`: red acts 3 steps, then sleeps 2..5 steps, again
  and again;
- `NoisyB_lineAgent`, `NoisyMeanderAgent`: before an exploit, with probability 1/2, red scans
  the target's services once more.

A step the base agent does not act (a sleep, or the extra scan) is not shown to it: it gets, at
its next action, the observation of its own last action, as if nothing had happened between.
The delays, pauses and coin flips draw from Python's `random`, which the CybORG backend seeds per
episode (wfrl.envs.cyborg).
"""
from __future__ import annotations

import functools
from typing import Any

FAMILY = ("DelayedB_lineAgent", "BurstyB_lineAgent", "NoisyB_lineAgent",
          "DelayedMeanderAgent", "BurstyMeanderAgent", "NoisyMeanderAgent")
# Pools: each episode's red drawn from the members by its env seed (pool_member; the twin of
# wfrl_pool_red_code in csrc/wfrl_cage2.h, members in the same order). family-train: CAGE2's two
# and one variant of each schedule; family-heldout: the other three, each a schedule seen in
# training on the other base red.
POOLS = {"family": FAMILY,
         "family-train": ("B_lineAgent", "RedMeanderAgent", "DelayedB_lineAgent",
                          "BurstyMeanderAgent", "NoisyB_lineAgent"),
         "family-heldout": ("DelayedMeanderAgent", "BurstyB_lineAgent", "NoisyMeanderAgent")}
POOL_CODES = {"family": 4, "family-train": 5, "family-heldout": 6}


def pool_member(pool: str, env_seed: int) -> str:
    """The red of the pool's episode with this env seed."""
    from wfrl.rng import MASK, splitmix64
    members = POOLS[pool]
    _, out = splitmix64((int(env_seed) ^ (0x706F6F6C00000000 + POOL_CODES[pool])) & MASK)
    return members[(out >> 32) % len(members)]
DELAY = (5, 25)    # the delayed variants' sleep at the start: uniform, steps
BURST = 3          # the bursty variants' actions in a row
PAUSE = (2, 5)     # and their pause after each burst: uniform, steps
NOISE_P = 0.5      # the noisy variants' chance of a scan before an exploit


@functools.lru_cache(maxsize=None)
def family_classes() -> dict:
    """name -> CybORG red agent class of every variant (CybORG imported here, on first use)."""
    import random

    from csle_cyborg.agents.simple_agents.b_line import B_lineAgent
    from csle_cyborg.agents.simple_agents.base_agent import BaseAgent
    from csle_cyborg.agents.simple_agents.meander import RedMeanderAgent
    from csle_cyborg.shared.actions.abstract_actions.discover_network_services import \
        DiscoverNetworkServices
    from csle_cyborg.shared.actions.abstract_actions.exploit_remote_service import \
        ExploitRemoteService
    from csle_cyborg.shared.actions.action import Sleep

    class VariantRed(BaseAgent):
        """A CAGE2 red agent (`base`) with a schedule around it (`mode`)."""
        base: type = B_lineAgent
        mode: str = "delayed"

        def __init__(self):
            self.agent = self.base()
            self._start()

        def _start(self) -> None:
            self.t = 0
            self.seen: Any = None     # the observation of the base agent's last own action
            self.fresh = True         # the last step was the base agent's own action
            self.count = self.pause = 0
            self.delay: int | None = None
            self.queued: Any = None   # (noisy) the exploit that follows the extra scan

        def _acts(self) -> bool:
            if self.mode == "delayed":
                if self.delay is None:
                    self.delay = random.randint(*DELAY)
                return self.t >= self.delay
            if self.mode == "bursty":
                if self.pause:
                    self.pause -= 1
                    return False
                self.count += 1
                if self.count == BURST:
                    self.count = 0
                    self.pause = random.randint(*PAUSE)
            return True

        def get_action(self, observation, action_space):
            if self.fresh or self.seen is None:
                self.seen = observation
            own = self._acts()
            self.t += 1
            self.fresh = own
            if not own:
                return Sleep()
            if self.queued is not None:
                action, self.queued = self.queued, None
                return action
            action = self.agent.get_action(self.seen, action_space)
            if (self.mode == "noisy" and isinstance(action, ExploitRemoteService)
                    and random.random() < NOISE_P):
                self.queued = action
                self.fresh = False
                return DiscoverNetworkServices(session=action.session, agent="Red",
                                               ip_address=action.ip_address)
            return action

        def end_episode(self):
            self.agent.end_episode()
            self._start()

        def train(self, results):
            pass

        def set_initial_values(self, action_space, observation):
            pass

    out = {}
    for name in FAMILY:
        mode = name.split("B_line")[0].split("Meander")[0].lower()
        base = B_lineAgent if "B_line" in name else RedMeanderAgent
        out[name] = type(name, (VariantRed,), {"base": base, "mode": mode,
                                               "__module__": __name__})
    return out
