"""The compiled CAGE2 as a native gymnasium VectorEnv (wfrl.envs.make_vec, or
gymnasium.make_vec("wfrl/CAGE2-v0", num_envs=n)).

One call into C per step steps all n envs, resets the finished ones as the autoreset mode says,
and writes observations, rewards, terminations, truncations and red's access into arrays
allocated once (wfrl._core.Cage2Vec, csrc/wfrl_vec.h); no Python runs per env.

Seeding follows gymnasium's convention and the single env's: reset(seed=s) seeds env i with s + i,
and each env's later episodes (autoreset, or reset() without a seed) continue that env's own chain
of seeds (wfrl.envs.sim.next_episode_seed), so env i plays the same episodes as
wfrl.envs.make(red_agent=..., seed=s + i) reset the same way.
"""
from __future__ import annotations

import operator
import os

import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

import wfrl._core as _core
from wfrl.envs.actions import N_ACTIONS, N_HOSTS
from wfrl.envs.base import EP_LEN, OBS_DIM, check_red_agent
from wfrl.envs.gym_env import check_max_steps
from wfrl.errors import UserError

# wfrl._core's codes for gymnasium's modes (csrc/wfrl_vec.h)
_MODE_CODES = {AutoresetMode.NEXT_STEP: _core.AUTORESET_NEXT_STEP,
               AutoresetMode.SAME_STEP: _core.AUTORESET_SAME_STEP,
               AutoresetMode.DISABLED: _core.AUTORESET_DISABLED}
_WRITE_INTO_FRESH_FROM = 1024


def check_num_envs(num_envs) -> int:
    try:
        n = operator.index(num_envs)
    except TypeError:
        raise UserError(f"num_envs must be an integer >= 1, got {num_envs!r}") from None
    if n < 1:
        raise UserError(f"num_envs must be an integer >= 1, got {n}")
    return n


def check_autoreset_mode(mode) -> AutoresetMode:
    """An AutoresetMode, or its value ("NextStep", "SameStep", "Disabled")."""
    if isinstance(mode, AutoresetMode):
        return mode
    try:
        return AutoresetMode(mode)
    except ValueError:
        raise UserError(f"unknown autoreset mode {mode!r} (choose from "
                        f"{', '.join(m.value for m in AutoresetMode)})") from None


def red_agents_per_env(red_agent, n: int) -> tuple[str, ...]:
    """One red agent name per env: a name for all (incl. "mixed": each env's episodes draw B_line
    or Meander by their seed), or a sequence of n names."""
    from wfrl.config.names import is_learned, is_population
    reds = (red_agent,) * n if isinstance(red_agent, str) else tuple(red_agent)
    if len(reds) != n:
        raise UserError(f"red_agent: {len(reds)} names for {n} envs (give one name or {n})")
    for r in reds:
        check_red_agent(r)
        if is_learned(r) or is_population(r):
            raise UserError(f"{r}: the vector env plays the scripted reds and pools; a learned "
                            "red or a population plays in wfrl.envs.make (the single env) and "
                            "the collectors")
    return reds


def initial_seeds(seed, n: int) -> np.ndarray:
    """Seeds of each env's first episode: seed + i, or fresh entropy when seed is None."""
    if seed is None:
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()
    try:
        s = operator.index(seed)
    except TypeError:
        raise UserError(f"seed must be an integer or None, got {seed!r}") from None
    return np.array([(s + i) % 2**64 for i in range(n)], dtype=np.uint64)


class Cage2VectorEnv(VectorEnv):
    """n compiled CAGE2 envs as one gymnasium VectorEnv.

    Spaces: observation Box(0, 1, (n, 52), float32), action MultiDiscrete([145] * n).
    step(actions int[n]) → obs float32 [n, 52], rewards float64 [n], terminations bool [n] (always
    False: CAGE2 episodes only truncate, at step max_steps: 100, or CAGE2's 30 or 50),
    truncations bool [n], infos with "red_access" uint8 [n, 13] (and gymnasium's mask
    "_red_access").

    autoreset_mode (metadata["autoreset_mode"]) is one of gymnasium's:
      NEXT_STEP (default): the step after an episode's last step resets that env (action ignored,
        reward 0) and returns the new episode's first obs and red access;
      SAME_STEP: the last step of an episode already returns the next episode's first obs, and
        infos["final_obs"] (object array, gymnasium's layout) / infos["final_info"]["red_access"]
        hold the ended episode's last ones, with masks "_final_obs"/"_final_info";
      DISABLED: finished envs wait for reset(options={"reset_mask": mask}).

    copy=True returns new arrays from every call (the compiled step writes straight into them);
    copy=False returns the env's own arrays, which the next reset/step overwrites.
    """

    def __init__(self, num_envs: int, red_agent="B_lineAgent", seed: int | None = None,
                 autoreset_mode=AutoresetMode.NEXT_STEP, copy: bool = True,
                 leaderboard: bool = False, max_steps: int = EP_LEN):
        self.num_envs = check_num_envs(num_envs)
        self.max_steps = check_max_steps(max_steps)
        self.red_agents = red_agents_per_env(red_agent, self.num_envs)
        self.autoreset_mode = check_autoreset_mode(autoreset_mode)
        self.copy = bool(copy)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.render_mode = None
        self.single_observation_space = spaces.Box(0.0, 1.0, (OBS_DIM,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(N_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        kinds = np.array([_core.red_kind_code(r, leaderboard) for r in self.red_agents],
                         dtype=np.uint8)
        self._core = _core.Cage2Vec(kinds, _MODE_CODES[self.autoreset_mode],
                                    initial_seeds(seed, self.num_envs), self.max_steps)
        # copy=True: from this many envs on, fresh arrays are handed to each step to write into
        # instead of copying the results afterwards; below it the copy is cheaper than five
        # allocations (docs/benchmarks.md, "The vector env")
        self._fresh = self.copy and self.num_envs >= _WRITE_INTO_FRESH_FROM
        self._all = np.ones(self.num_envs, dtype=np.bool_)
        self._all.flags.writeable = False
        self._started = False

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        """Reset every env (or those of options["reset_mask"], bool [n]). seed: None (each env
        continues its chain of episode seeds), an int s (env i gets s + i) or a list of n
        ints/None."""
        n, core = self.num_envs, self._core
        mask = None
        if options is not None and "reset_mask" in options:
            mask = self._check_mask(options["reset_mask"])
        if seed is not None:
            if isinstance(seed, (int, np.integer)):
                super().reset(seed=int(seed))
                new = initial_seeds(int(seed), n)
                given = self._all
            else:
                seeds = list(seed)
                if len(seeds) != n:
                    raise ValueError(f"seed: a list of {len(seeds)} seeds for {n} envs")
                given = np.array([s is not None for s in seeds], dtype=np.bool_)
                new = np.array([0 if s is None else operator.index(s) % 2**64 for s in seeds],
                               dtype=np.uint64)
            take = given if mask is None else given & mask
            core.seeds[take] = new[take]
        if self._fresh:
            self._bind_fresh(keep=mask is not None)
        core.reset(mask)
        self._started = True
        copy = self.copy and not self._fresh
        info = {"red_access": core.red_access.copy() if copy else core.red_access,
                "_red_access": self._all.copy() if mask is None else mask.copy()}
        return (core.obs.copy() if copy else core.obs), info

    def step(self, actions):
        if not self._started:
            raise ResetNeeded("step() before reset(): call reset() first")
        if not (type(actions) is np.ndarray and actions.dtype == np.int32
                and actions.flags.c_contiguous):
            actions = self._check_actions(actions)
        core = self._core
        if self._fresh:
            self._bind_fresh()  # the step writes its results straight into new arrays
        ended = core.step(actions)
        if self.copy and not self._fresh:
            out = (core.obs.copy(), core.reward.copy(), core.terminated.copy(),
                   core.truncated.copy())
            info = {"red_access": core.red_access.copy(), "_red_access": self._all.copy()}
        else:
            out = (core.obs, core.reward, core.terminated, core.truncated)
            info = {"red_access": core.red_access,
                    "_red_access": self._all.copy() if self.copy else self._all}
        if ended and self.autoreset_mode is AutoresetMode.SAME_STEP:
            self._add_final(info)
        return (*out, info)

    def close_extras(self, **kwargs):
        pass

    # -- wfrl extras -----------------------------------------------------------------------
    def playing(self) -> tuple[str, ...]:
        """The red agent each env's current episode is played against (the mixed red resolved)."""
        out = np.zeros(self.num_envs, dtype=np.uint8)
        self._core.playing(out)
        from wfrl.envs.reds import RED_SPECS
        names = {spec.code: spec.name for spec in RED_SPECS}
        return tuple(names[int(k)] for k in out)

    @property
    def next_seeds(self) -> np.ndarray:
        """The seed each env's next episode will start from (a copy)."""
        return self._core.seeds.copy()

    # -- helpers ---------------------------------------------------------------------------
    def _bind_fresh(self, keep=False):
        """Have the next reset/step write into new arrays (copy=True: nothing returned earlier is
        ever written again). keep: start them from the current values (a masked reset)."""
        core, n = self._core, self.num_envs
        if keep:
            core.bind(core.obs.copy(), core.reward.copy(), core.terminated.copy(),
                      core.truncated.copy(), core.red_access.copy())
        else:
            core.bind(np.empty((n, OBS_DIM), np.float32), np.empty(n, np.float64),
                      np.empty(n, np.bool_), np.empty(n, np.bool_),
                      np.empty((n, N_HOSTS), np.uint8))

    def _add_final(self, info):
        core = self._core
        ended = core.truncated.copy()
        idx = np.flatnonzero(ended)
        last = core.final_obs[idx]  # fresh rows
        final_obs = np.full(self.num_envs, None, dtype=object)
        for j, i in enumerate(idx):
            final_obs[i] = last[j]
        final_ra = np.zeros((self.num_envs, N_HOSTS), dtype=np.uint8)
        final_ra[idx] = core.final_red_access[idx]
        info["final_obs"] = final_obs
        info["_final_obs"] = ended
        info["final_info"] = {"red_access": final_ra, "_red_access": ended.copy()}
        info["_final_info"] = ended.copy()

    def _check_mask(self, mask):
        n = self.num_envs
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
            raise ValueError(f"options['reset_mask'] must be a bool numpy array of shape ({n},)")
        if not mask.any():
            raise ValueError("options['reset_mask'] resets no env")
        return mask

    def _check_actions(self, actions):
        n = self.num_envs
        a = np.asarray(actions)
        if a.shape != (n,):
            raise ValueError(f"actions must have shape ({n},) (one per env), got {a.shape}")
        if a.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers in [0, {N_ACTIONS}), got dtype {a.dtype}")
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= N_ACTIONS:
            bad = int(np.flatnonzero((a < 0) | (a >= N_ACTIONS))[0])
            raise ValueError(f"actions[{bad}]={a[bad]} outside [0, {N_ACTIONS})")
        return np.ascontiguousarray(a, dtype=np.int32)
