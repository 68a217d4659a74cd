"""Stable-Baselines3's VecEnv interface over a gymnasium VectorEnv of CAGE2 envs.

    from wfrl.envs import make_vec
    from wfrl.envs.sb3 import SB3VecEnv
    venv = SB3VecEnv(make_vec(16, seed=0, autoreset_mode="SameStep"))
    model = stable_baselines3.PPO("MlpPolicy", venv)

SB3 steps with same-step autoreset (the observation returned with done=True is the next
episode's first; the last one is infos[i]["terminal_observation"]), so the wrapped env must use
gymnasium's AutoresetMode.SAME_STEP. Works with the native vector env, with VecWorkflowWrapper
around it, and with the CybORG backend's AsyncVectorEnv (make_vec(..., backend="cyborg")).

stable-baselines3 is not a dependency of wfrl: install it to use this module.
"""
from __future__ import annotations

from collections.abc import Sized
from typing import cast

import numpy as np
from gymnasium.vector import AutoresetMode

from wfrl.errors import UserError

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise UserError("wfrl.envs.sb3 needs stable-baselines3 (pip install stable-baselines3)") \
        from exc

_SKIP = ("final_obs", "final_info")


class SB3VecEnv(VecEnv):
    """SB3 VecEnv view of `venv` (a gymnasium VectorEnv with SAME_STEP autoreset).

    Per step, infos[i] holds env i's entries of the vector info (info_keys: which ones; default
    all), at an episode's end overlaid with the ended episode's final info, plus SB3's
    "terminal_observation" and "TimeLimit.truncated". Rewards are float32, dones bool."""

    def __init__(self, venv, info_keys=None):
        mode = venv.metadata.get("autoreset_mode")
        if mode is not AutoresetMode.SAME_STEP and mode != AutoresetMode.SAME_STEP.value:
            raise UserError(f"SB3VecEnv needs a vector env with SAME_STEP autoreset, got {mode} "
                            "(make_vec(..., autoreset_mode='SameStep'))")
        self.venv = venv
        self.info_keys = None if info_keys is None else tuple(info_keys)
        self._actions = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)

    # -- SB3 API ---------------------------------------------------------------------------
    def reset(self):
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        obs, info = self.venv.reset(seed=seeds)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = self._split(info)
        return obs

    def step_async(self, actions):
        self._actions = actions

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        infos = self._split(info)
        if dones.any():
            final_obs = info["final_obs"]
            final_info = info.get("final_info", {})
            for i in np.flatnonzero(dones):
                infos[i].update(self._entries(final_info, i))
                infos[i]["terminal_observation"] = final_obs[i]
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, np.asarray(rewards, dtype=np.float32), dones, infos

    def close(self):
        self.venv.close()

    def get_attr(self, attr_name, indices=None):
        # SB3's _get_indices (typed Iterable): range(num_envs) for None, [i] for an int, else
        # `indices` as given (a list, as SB3 passes them)
        return [getattr(self.venv, attr_name)] * len(cast(Sized, self._get_indices(indices)))

    def set_attr(self, attr_name, value, indices=None):
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        if method_name == "action_masks" and hasattr(self.venv, "action_masks"):
            # sb3-contrib's MaskablePPO: each env's mask (VecActionMaskWrapper outermost)
            masks = self.venv.action_masks()
            return [masks[i] for i in self._get_indices(indices)]
        raise NotImplementedError(f"SB3VecEnv: a gymnasium vector env has no per-env objects to "
                                  f"call {method_name!r} on")

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False] * len(cast(Sized, self._get_indices(indices)))   # (see get_attr)

    # -- helpers ---------------------------------------------------------------------------
    def _entries(self, info, i):
        keys = self.info_keys if self.info_keys is not None else info.keys()
        out = {}
        for k in keys:
            if k in _SKIP or k.startswith("_") or k not in info:
                continue
            mask = info.get("_" + k)
            if mask is None or mask[i]:
                out[k] = info[k][i]
        return out

    def _split(self, info):
        return [self._entries(info, i) for i in range(self.num_envs)]
