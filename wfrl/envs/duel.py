"""CAGE2 as a two-player game: blue (the defender) and red (the attacker) are both agents.

`make_duel(backend="sim", seed=...)` is a PettingZoo Parallel env with agents "blue" and "red":

- blue: CAGE2's 52-float observation and 145 actions, rewarded with CAGE2's blue reward;
- red: CAGE2's red actions for Scenario2 (RED_ACTION_NAMES, 56: Sleep; DiscoverRemoteSystems per
  subnet; DiscoverNetworkServices, ExploitRemoteService, PrivilegeEscalate and Impact per host),
  masked to what red knows as CybORG's red action space is (infos["red"]["action_mask"]: a
  subnet once red knows it, a host's scan and exploit once it knows the IP, its escalation and
  impact once it knows the hostname); its observation is what red knows (RED_OBS_DIM floats:
  per host IP known, hostname known, services scanned, the access red last saw (user, root);
  each subnet known; its last action's success and failure; the step); its reward is the
  negative of blue's (zero-sum: blue's return is the one score).

An action the mask does not allow is played as CybORG plays an invalid one: nothing happens, and
red sees it fail. Episodes are 100 steps (max_steps: fewer), truncated, never terminated.

Either side can be a fixed policy through the single-agent views: `RedView` (gymnasium: red
against a fixed blue, for any single-agent learner) and `BlueView` (blue against a fixed red:
a scripted red of wfrl.envs.reds driven through the external interface, or a red policy).

The simulator's external red (csrc/wfrl_cage2.h, WFRL_RED_EXTERNAL) is the engine: the scripted
reds keep their compiled code, and a scripted red driven through this interface
(`Cage2Sim.scripted_red`) plays the built-in episodes bit for bit (tests/test_duel.py).
"""
from __future__ import annotations

import functools
import operator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wfrl.envs.actions import HOSTS, N_ACTIONS
from wfrl.config.names import DUEL_BACKENDS
from wfrl.envs.base import EP_LEN, OBS_DIM, RED_SUBNETS, backend_engine, is_leaderboard
from wfrl.errors import UserError

BLUE, RED = "blue", "red"
AGENTS = (BLUE, RED)
RED_N_ACTIONS = 1 + len(RED_SUBNETS) + 4 * len(HOSTS)
RED_HOST_FEATURES = ("ip_known", "hostname_known", "scanned", "user_seen", "root_seen")
RED_OBS_DIM = len(RED_HOST_FEATURES) * len(HOSTS) + len(RED_SUBNETS) + 3
# Red's actions by index (csrc/wfrl_cage2.h WFRL_RED_N_ACTIONS: the same order)
RED_ACTION_NAMES = (("Sleep",)
                    + tuple(f"DiscoverRemoteSystems {s}" for s in RED_SUBNETS)
                    + tuple(f"{kind} {h}" for kind in ("DiscoverNetworkServices",
                                                       "ExploitRemoteService",
                                                       "PrivilegeEscalate", "Impact")
                            for h in HOSTS))


def check_duel_backend(backend: str) -> str:
    """A backend the two-player env plays on (the simulator, either code), else one line."""
    if backend not in DUEL_BACKENDS:
        raise UserError(f"the two-player env plays on {' or '.join(DUEL_BACKENDS)}, not "
                        f"{backend!r}")
    return backend


def red_action_index(action) -> int:
    """A red action as an int in 0..RED_N_ACTIONS-1; anything else is a ValueError in one line."""
    try:
        a = operator.index(action)
    except TypeError:
        raise ValueError(f"a red action is one integer in [0, {RED_N_ACTIONS}), got "
                         f"{action!r}") from None
    if not 0 <= a < RED_N_ACTIONS:
        raise ValueError(f"red action {a} outside [0, {RED_N_ACTIONS})")
    return a


def _blue_index(action) -> int:
    from wfrl.envs.gym_env import action_index
    return action_index(action)


class DuelCore:
    """One simulator env with an external red: the game's state and step, without the
    multi-agent API (DuelEnv, RedView and BlueView are views of it). `script`: the scripted red
    whose compiled decision scripted_red() plays (a red of wfrl.envs.reds; SleepAgent when red
    is only ever given actions)."""

    def __init__(self, backend: str = "sim", seed: int | None = None,
                 script: str = "SleepAgent", max_steps: int = EP_LEN):
        from wfrl._core import RED_N_ACTIONS as C_N, RED_OBS_DIM as C_DIM, Cage2Sim
        from wfrl.envs.gym_env import check_max_steps
        from wfrl.envs.reds import red_spec
        from wfrl.envs.sim import next_episode_seed
        assert (C_N, C_DIM) == (RED_N_ACTIONS, RED_OBS_DIM)   # the C layout (tests hold it)
        check_duel_backend(backend)
        self.backend = backend
        self.leaderboard = is_leaderboard(backend)
        self.script = red_spec(script).name
        self.max_steps = check_max_steps(max_steps)
        self.sim = Cage2Sim(1, self.script, self.leaderboard, external=True)
        self._next = next_episode_seed
        self.t = 0
        self.episode_seed = 0
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        import os
        self._next_seed = (int.from_bytes(os.urandom(8), "little") if seed is None
                           else int(seed) % 2**64)

    def reset(self, seed: int | None = None) -> np.ndarray:
        """A new episode (from `seed`, else the next of the chain); returns blue's observation."""
        if seed is not None:
            self.seed(seed)
        self.episode_seed = self._next_seed
        self._next_seed = self._next(self.episode_seed)
        obs, _ = self.sim.reset(0, self.episode_seed)
        self.t = 0
        return obs

    def red_obs(self) -> np.ndarray:
        return self.sim.red_obs(0)

    def red_mask(self) -> np.ndarray:
        return self.sim.red_mask(0)

    def scripted_red(self) -> int:
        """The scripted red's action for the next step (given already)."""
        return self.sim.scripted_red(0)

    def step(self, blue_action, red_action=None) -> tuple[np.ndarray, float, np.ndarray, bool]:
        """One step: red plays red_action (None: the one scripted_red() gave, else Sleep).
        Returns (blue's observation, blue's reward, red's access per host, truncated)."""
        if self.t >= self.max_steps:
            raise RuntimeError("step() after the episode was truncated; call reset()")
        b = _blue_index(blue_action)
        if red_action is not None:
            self.sim.set_red_action(0, red_action_index(red_action))
        obs, reward, access = self.sim.step(0, b)
        self.t += 1
        return obs, reward, access, self.t >= self.max_steps


class DuelEnv:
    """The PettingZoo Parallel API over DuelCore (module docstring). Made by make_duel, which
    gives it PettingZoo's ParallelEnv as its base."""

    metadata = {"name": "wfrl_cage2_duel_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
        self.core = DuelCore(backend, seed, "SleepAgent", max_steps)
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.observation_spaces = {
            BLUE: spaces.Box(0.0, 1.0, (OBS_DIM,), dtype=np.float32),
            RED: spaces.Box(0.0, 1.0, (RED_OBS_DIM,), dtype=np.float32)}
        self.action_spaces = {BLUE: spaces.Discrete(N_ACTIONS),
                              RED: spaces.Discrete(RED_N_ACTIONS)}
        self.render_mode = None

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def _infos(self, access=None) -> dict:
        blue: dict[str, Any] = {} if access is None else {"red_access": access}
        return {BLUE: blue, RED: {"action_mask": self.core.red_mask().astype(np.int8)}}

    def reset(self, seed=None, options=None):
        obs = self.core.reset(seed)
        self.agents = list(AGENTS)
        return {BLUE: obs, RED: self.core.red_obs()}, self._infos()

    def step(self, actions: dict):
        if not self.agents:
            raise RuntimeError("step() with no agents: call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"step() needs an action of every live agent; missing {missing}")
        obs, reward, access, done = self.core.step(actions[BLUE], actions[RED])
        out = {BLUE: obs, RED: self.core.red_obs()}
        rewards = {BLUE: float(reward), RED: -float(reward)}
        terms = {a: False for a in AGENTS}
        truncs = {a: done for a in AGENTS}
        infos = self._infos(access)
        if done:
            self.agents = []
        return out, rewards, terms, truncs, infos

    def render(self):
        return None

    def close(self):
        pass


def fixed_blue(blue):
    """A fixed blue policy: an object with get_action(observation, action_space) and
    end_episode() (a checkpoint: wfrl.load_agent(checkpoint, workflow)), or "sleep"."""
    if hasattr(blue, "get_action") and hasattr(blue, "end_episode"):
        return blue
    if blue == "sleep":
        return _Sleeper()
    raise UserError(f"a fixed blue is 'sleep' or an agent with get_action and end_episode (a "
                    f"checkpoint: wfrl.load_agent(checkpoint)), not {blue!r}")


class _Sleeper:
    def get_action(self, observation, action_space=None) -> int:
        return 0

    def end_episode(self) -> None:
        pass


class RedView(gym.Env):
    """Red against a fixed blue, as a gymnasium env (made by red_env): Box(0, 1, (RED_OBS_DIM,))
    observations, Discrete(RED_N_ACTIONS) actions, red's reward (the negative of blue's), the
    mask in info["action_mask"] and action_masks() (sb3-contrib's MaskablePPO reads it)."""

    metadata = {"render_modes": []}

    def __init__(self, blue, backend: str = "sim", seed: int | None = None,
                 max_steps: int = EP_LEN):
        self.core = DuelCore(backend, seed, "SleepAgent", max_steps)
        self.blue = fixed_blue(blue)
        self.observation_space = spaces.Box(0.0, 1.0, (RED_OBS_DIM,), dtype=np.float32)
        self.action_space = spaces.Discrete(RED_N_ACTIONS)
        self._blue_obs = np.zeros(OBS_DIM, np.float32)

    def action_masks(self) -> np.ndarray:
        return self.core.red_mask()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._blue_obs = self.core.reset(seed)
        self.blue.end_episode()
        return self.core.red_obs(), {"action_mask": self.core.red_mask()}

    def step(self, action):
        b = int(self.blue.get_action(self._blue_obs, N_ACTIONS))
        self._blue_obs, reward, access, done = self.core.step(b, action)
        return (self.core.red_obs(), -float(reward), False, done,
                {"action_mask": self.core.red_mask(), "blue_action": b, "red_access": access})

    def close(self):
        pass


class BlueView(gym.Env):
    """Blue against a fixed red, as a gymnasium env (made by blue_env): a scripted red of
    wfrl.envs.reds driven through the external interface (the same episodes as the built-in
    red), or a red policy with get_action(red_observation, action_mask) and end_episode()."""

    metadata = {"render_modes": []}

    def __init__(self, red, backend: str = "sim", seed: int | None = None,
                 max_steps: int = EP_LEN):
        scripted = isinstance(red, str)
        self.core = DuelCore(backend, seed, red if scripted else "SleepAgent", max_steps)
        self.red = None if scripted else red
        self.observation_space = spaces.Box(0.0, 1.0, (OBS_DIM,), dtype=np.float32)
        self.action_space = spaces.Discrete(N_ACTIONS)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        obs = self.core.reset(seed)
        if self.red is not None:
            self.red.end_episode()
        return obs, {}

    def step(self, action):
        if self.red is None:
            self.core.scripted_red()
            red_action = None
        else:
            red_action = int(self.red.get_action(self.core.red_obs(), self.core.red_mask()))
        obs, reward, access, done = self.core.step(action, red_action)
        return obs, float(reward), False, done, {"red_access": access}

    def close(self):
        pass


def red_env(blue, backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
    """Red against a fixed blue: a gymnasium Env (RedView)."""
    return RedView(blue, backend, seed, max_steps)


def blue_env(red, backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
    """Blue against a fixed red: a gymnasium Env (BlueView)."""
    return BlueView(red, backend, seed, max_steps)


@functools.lru_cache(maxsize=None)
def _parallel_class():
    try:
        from pettingzoo import ParallelEnv
    except ImportError:
        raise UserError("the two-player env needs PettingZoo: pip install 'wfrl[duel]' "
                        "(scripts/setup.sh installs it)") from None
    return type("DuelEnv", (DuelEnv, ParallelEnv), {"__module__": __name__,
                                                     "__doc__": DuelEnv.__doc__})


def make_duel(backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
    """CAGE2's two-player env (module docstring): a PettingZoo ParallelEnv, agents blue and
    red."""
    if backend_engine(backend) != "sim":
        check_duel_backend(backend)
    return _parallel_class()(backend, seed, max_steps)
