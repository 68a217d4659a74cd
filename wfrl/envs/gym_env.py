"""gymnasium view of any wfrl backend (registered as `wfrl/CAGE2-v0`)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wfrl.envs.base import EP_LEN, N_ACTIONS, OBS_DIM


class Cage2Env(gym.Env):
    """CAGE2 blue: Box(0, 1, (52,), float32) observations, Discrete(145) actions, 100-step episodes.

    The episode never terminates; it is truncated at step 100. info["red_access"] is a uint8[13]
    copy of red's access per host after the step (0 none, 1 user, 2 privileged).
    """

    metadata = {"render_modes": []}

    def __init__(self, backend):
        self.backend = backend
        self.observation_space = spaces.Box(0.0, 1.0, (OBS_DIM,), dtype=np.float32)
        self.action_space = spaces.Discrete(N_ACTIONS)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.backend.seed(seed)
        obs, red_access = self.backend.reset()
        self._t = 0
        return obs, {"red_access": red_access}

    def step(self, action):
        if self._t >= EP_LEN:
            raise RuntimeError("step() after the episode was truncated; call reset()")
        obs, reward, red_access = self.backend.step(int(action))
        self._t += 1
        return obs, reward, False, self._t >= EP_LEN, {"red_access": red_access}

    def close(self):
        self.backend.close()
