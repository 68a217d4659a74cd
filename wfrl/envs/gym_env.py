"""gymnasium view of any wfrl backend (registered as `wfrl/CAGE2-v0`)."""
from __future__ import annotations

import operator

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wfrl.envs.actions import N_ACTIONS
from wfrl.envs.base import EP_LEN, OBS_DIM
from wfrl.envs.sim import SimBackend

_NOT_STARTED = EP_LEN + 1


def action_index(action, n: int = N_ACTIONS, what: str = "action") -> int:
    """A Discrete(n) action (blue's 145 by default; `what` names it) as an int; anything else is
    a ValueError in one line."""
    try:
        a = operator.index(action)
    except TypeError:
        article = "an" if what[0] in "aeiou" else "a"
        raise ValueError(f"{article} {what} is one integer in [0, {n}), got {action!r}") from None
    if not 0 <= a < n:
        raise ValueError(f"{what} {a} outside [0, {n})")
    return a


def check_max_steps(max_steps) -> int:
    """An episode length in 1..100 (CAGE2 scores 30, 50 and 100), or a ValueError in one line."""
    try:
        n = operator.index(max_steps)
    except TypeError:
        raise ValueError(f"max_steps must be an integer in [1, {EP_LEN}], got {max_steps!r}") \
            from None
    if not 1 <= n <= EP_LEN:
        raise ValueError(f"max_steps must lie in [1, {EP_LEN}] (CAGE2: 30, 50, 100), got {n}")
    return n


class Cage2Env(gym.Env):
    """CAGE2 blue: Box(0, 1, (52,), float32) observations, Discrete(145) actions, 100-step episodes
    (max_steps: 30 or 50 for CAGE2's shorter settings, any of 1..100).

    The episode never terminates; it is truncated at step max_steps. info["red_access"] is a uint8[13]
    array of red's access per host after the step (0 none, 1 user, 2 privileged). Every returned
    array is the caller's: no later step writes into it.

    On the simulator, step is the compiled wfrl._core.Cage2Gym.step itself (bound per instance):
    the action check, the episode's end, the step and the returned tuple are all done there, and
    the arrays are views of two blocks allocated once per episode. Other backends go through the
    backend contract (wfrl.envs.base) step by step; both return the same values.
    """

    metadata = {"render_modes": []}

    def __init__(self, backend, max_steps: int = EP_LEN):
        self.max_steps = check_max_steps(max_steps)
        self.backend = backend
        self.observation_space = spaces.Box(0.0, 1.0, (OBS_DIM,), dtype=np.float32)
        self.action_space = spaces.Discrete(N_ACTIONS)
        self._t = _NOT_STARTED
        self._fast = None
        if type(backend) is SimBackend and backend.red is None:   # (a learned red: step by step)
            from wfrl._core import Cage2Gym
            self._fast = Cage2Gym(backend.sim, self.max_steps)
            # an instance attribute over the method (what `self.step = ...` does; mypy refuses
            # assigning to a method)
            setattr(self, "step", self._fast.step)  # noqa: B010

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.backend.seed(seed)
        if self._fast is not None:
            return self._fast.reset(self.backend.take_episode_seed())
        obs, red_access = self.backend.reset()
        self._t = 0
        return obs, {"red_access": red_access}

    def step(self, action):
        if self._t >= self.max_steps:
            raise RuntimeError("step() before reset(); call reset() first" if self._t > EP_LEN
                               else "step() after the episode was truncated; call reset()")
        obs, reward, red_access = self.backend.step(action_index(action))
        self._t += 1
        return obs, reward, False, self._t >= self.max_steps, {"red_access": red_access}

    def close(self):
        self.backend.close()
