"""The recipe's two other parts for any RL library: the memory block and the action mask that wfrl's
own policy gets inside its compiled rollout loop, as gymnasium wrappers.

    env = ActionMaskWrapper(MemoryWrapper(wfrl.envs.make()))            # obs [118], info mask
    env = ActionMaskWrapper(WorkflowWrapper(MemoryWrapper(wfrl.envs.make()), "critical_first"))
    venv = VecActionMaskWrapper(VecMemoryWrapper(wfrl.envs.make_vec(64)))
    gymnasium.make("wfrl/CAGE2-Recipe-v0", workflow="critical_first")   # the line above it

  * MemoryWrapper / VecMemoryWrapper: the observation becomes CAGE2's 52 bits followed by the
    memory block (wfrl.features.MEM_DIM = 66 floats in [0, 1]: per host scanned, last scanned,
    compromise seen since my last Restore, restored, placed-decoy share; then t / 100), computed
    from the episode's own observations and actions only, never from the true state.
  * ActionMaskWrapper / VecActionMaskWrapper: info["action_mask"] (bool [145], [n, 145] for the
    vector form) and action_masks() (sb3-contrib's MaskablePPO calls it) say which actions can do
    anything: Monitor (the same as Sleep in CAGE2) and decoys that cannot be placed or cannot catch
    an exploit on their host, or are already placed, are masked. The observation is unchanged.

Both read the first 52 floats of the observation as CAGE2's, so they compose with each other and
with the workflow wrappers in any order; MemoryWrapper innermost, then WorkflowWrapper gives
obs ⊕ memory ⊕ workflow one-hot, the input of wfrl's own policy network. Keep the mask wrapper
outermost: action_masks() is found on the outer object (gymnasium's get_wrapper_attr, or
wfrl.envs.sb3.SB3VecEnv for MaskablePPO on a vector env). The vector forms
follow the env's autoreset mode as VecWorkflowWrapper does (with SAME_STEP, info["final_obs"]
carries the ended episode's last memory block).

Both are the rollout loop's compiled memory (csrc/wfrl_memory.h, through wfrl._core.MemoryBatch)
applied to a batch of envs; its plain-Python twin is wfrl.features.MemoryTracker.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorWrapper
from gymnasium.vector.utils import batch_space

import wfrl._core as _core
from wfrl.envs.actions import N_ACTIONS
from wfrl.envs.base import OBS_DIM, check_cage2_box
from wfrl.errors import UserError
from wfrl.features import MEM_DIM


def _rows(obs):
    return np.ascontiguousarray(np.asarray(obs, np.float32).reshape(-1, obs.shape[-1]))


class _Memory:
    """A MemoryBatch driven by gymnasium's reset/step of one env or a vector env."""

    def __init__(self, n, autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP):
        self.n = n
        self.batch = _core.MemoryBatch(n)
        self.mode = autoreset_mode
        self._pending = np.zeros(n, np.bool_)  # NEXT_STEP: the env resets at its next step
        self._acts = np.zeros(n, np.int32)

    def reset(self, obs, mask=None):
        self.batch.begin(mask)
        self.batch.update(_rows(obs), mask)
        if mask is None:
            self._pending[:] = False
        else:
            self._pending[mask] = False

    def step(self, actions, obs, done, final_obs=None):
        """After a step with `actions` that returned `obs` and ended the episodes of `done`;
        returns the ended episodes' last (memory block, mask) for SAME_STEP, else None."""
        acts = self._acts
        acts[:] = np.asarray(actions, np.int64).reshape(self.n)
        final = None
        if self.mode is AutoresetMode.NEXT_STEP and self._pending.any():
            acts[self._pending] = -1  # these envs were reset by this step
            self.batch.acted(acts)
            self.batch.begin(self._pending)
        else:
            self.batch.acted(acts)
        if self.mode is AutoresetMode.SAME_STEP and done.any():
            final = {int(i): self.batch.peek(int(i), np.asarray(final_obs[i], np.float32))
                     for i in np.flatnonzero(done)}
            self.batch.begin(done)
        self.batch.update(_rows(obs))
        if self.mode is AutoresetMode.NEXT_STEP:
            self._pending[:] = done
        return final


class MemoryWrapper(gym.ObservationWrapper):
    """One CAGE2 env whose observation carries the memory block: Box(0, 1, (d + 66,)) for an env
    with d-float observations (CAGE2's 52 first); see the module docstring."""

    def __init__(self, env):
        super().__init__(env)
        check_cage2_box(env.observation_space, "MemoryWrapper")
        d = env.observation_space.shape[0]
        self.observation_space = spaces.Box(0.0, 1.0, (d + MEM_DIM,), dtype=np.float32)
        self._mem = _Memory(1)

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._mem.reset(obs[None])
        return self.observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._mem.step(action, obs[None], np.zeros(1, np.bool_))
        return self.observation(obs), reward, terminated, truncated, info

    def observation(self, obs):
        return np.concatenate((np.asarray(obs, np.float32), self._mem.batch.features[0]))


class ActionMaskWrapper(gym.Wrapper):
    """One CAGE2 env with its action mask: info["action_mask"] (bool [145]) at reset and every
    step, and action_masks() for the current observation (sb3-contrib's MaskablePPO)."""

    def __init__(self, env):
        super().__init__(env)
        check_cage2_box(env.observation_space, "ActionMaskWrapper")
        if not isinstance(env.action_space, spaces.Discrete) or env.action_space.n != N_ACTIONS:
            raise UserError(f"ActionMaskWrapper needs CAGE2's Discrete({N_ACTIONS}) actions")
        self._mem = _Memory(1)

    def action_masks(self) -> np.ndarray:
        return self._mem.batch.allowed[0].astype(np.bool_)

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._mem.reset(np.asarray(obs, np.float32)[None, :OBS_DIM])
        info["action_mask"] = self.action_masks()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._mem.step(action, np.asarray(obs, np.float32)[None, :OBS_DIM],
                       np.zeros(1, np.bool_))
        info["action_mask"] = self.action_masks()
        return obs, reward, terminated, truncated, info


def _reset_mask(options):
    """The envs a reset restarts (None: all), read before the inner reset: gymnasium's own vector
    envs take "reset_mask" out of the options they are given."""
    mask = None if options is None else options.get("reset_mask")
    return None if mask is None else np.array(mask, np.bool_)


def _autoreset_mode(env) -> AutoresetMode:
    from wfrl.envs.vector import check_autoreset_mode
    return check_autoreset_mode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))


class _VecMemoryBase(VectorWrapper):
    def __init__(self, env, what):
        super().__init__(env)
        check_cage2_box(env.single_observation_space, what)
        self._mem = _Memory(env.num_envs, _autoreset_mode(env))

    def _reset(self, obs, mask):
        self._mem.reset(np.asarray(obs, np.float32)[:, :OBS_DIM], mask)

    def _step(self, actions, obs, terminations, truncations, info):
        done = np.asarray(terminations) | np.asarray(truncations)
        final_obs = info.get("final_obs")
        final = self._mem.step(actions, np.asarray(obs, np.float32)[:, :OBS_DIM], done,
                               None if final_obs is None else
                               [None if o is None else np.asarray(o)[:OBS_DIM] for o in final_obs])
        return final


class VecMemoryWrapper(_VecMemoryBase):
    """A CAGE2 VectorEnv whose observations carry each env's memory block: [n, d + 66]."""

    def __init__(self, env):
        super().__init__(env, "VecMemoryWrapper")
        d = env.single_observation_space.shape[0]
        self.single_observation_space = spaces.Box(0.0, 1.0, (d + MEM_DIM,), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def observations(self, obs):
        return np.concatenate((np.asarray(obs, np.float32), self._mem.batch.features), axis=1)

    def reset(self, *, seed=None, options=None):
        mask = _reset_mask(options)
        obs, info = self.env.reset(seed=seed, options=options)
        self._reset(obs, mask)
        return self.observations(obs), info

    def step(self, actions):
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        final = self._step(actions, obs, terminations, truncations, info)
        if final:
            last = info["final_obs"].copy()
            for i, (feats, _) in final.items():
                last[i] = np.concatenate((np.asarray(last[i], np.float32), feats))
            info["final_obs"] = last
        return self.observations(obs), rewards, terminations, truncations, info


class VecActionMaskWrapper(_VecMemoryBase):
    """A CAGE2 VectorEnv with each env's action mask: info["action_mask"] bool [n, 145] (and
    gymnasium's "_action_mask"), action_masks() → bool [n, 145]; observations unchanged."""

    def __init__(self, env):
        super().__init__(env, "VecActionMaskWrapper")
        if not isinstance(env.single_action_space, spaces.Discrete) \
                or env.single_action_space.n != N_ACTIONS:
            raise UserError(f"VecActionMaskWrapper needs CAGE2's Discrete({N_ACTIONS}) actions")

    def action_masks(self) -> np.ndarray:
        return self._mem.batch.allowed.astype(np.bool_)

    def _with_mask(self, info):
        info["action_mask"] = self.action_masks()
        info["_action_mask"] = np.ones(self.num_envs, np.bool_)
        return info

    def reset(self, *, seed=None, options=None):
        mask = _reset_mask(options)
        obs, info = self.env.reset(seed=seed, options=options)
        self._reset(obs, mask)
        return obs, self._with_mask(info)

    def step(self, actions):
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        self._step(actions, obs, terminations, truncations, info)
        return obs, rewards, terminations, truncations, self._with_mask(info)


class VecBeliefWrapper(VectorWrapper):
    """A CAGE2 VectorEnv whose observations carry each env's belief block: [n, d + BELIEF_DIM]
    (wfrl.features.BELIEF_DIM = 42: per host the share of particles in which red has no, user or
    privileged access, then the share of each red kind), from a compiled particle filter per env
    (csrc/wfrl_belief.h, wfrl._core.ParticleFilter) fed the env's observations and the actions taken.

    particles: N per env; red: the particles' red kinds ("mixture": B_line, Meander and Sleep in
    equal shares, or one red agent's name); leaderboard: the particles play by the leaderboard's
    CybORG code (match the env's backend); seed: the filters' random streams (with each env's
    episode count, so a run is deterministic in it). Its plain twin is
    wfrl.features.ParticleFilterReference with wfrl.features.belief_features."""

    def __init__(self, env, particles: int = 64, red: str = "mixture", leaderboard: bool = False,
                 seed: int = 0):
        super().__init__(env)
        from wfrl.features import BELIEF_DIM, MIXTURE_RED_BITS, PARTICLE_RED_BITS
        check_cage2_box(env.single_observation_space, "VecBeliefWrapper")
        n = env.num_envs
        self.particles = int(particles)
        if not 1 <= self.particles <= 100_000:
            raise UserError(f"particles must lie in [1, 100000], got {particles}")
        bits = {"mixture": MIXTURE_RED_BITS, **PARTICLE_RED_BITS}
        if red not in bits:
            raise UserError(f"unknown plan red {red!r} (choose from {', '.join(bits)})")
        self._red_bits = bits[red]
        self._mode = _autoreset_mode(env)
        self._resets_next = np.zeros(n, np.bool_)   # NEXT_STEP: these envs reset at their next step
        self._leaderboard = bool(leaderboard)
        self._seed = int(seed)
        self._filters = [_core.ParticleFilter(self.particles, self._seed) for _ in range(n)]
        self._episodes = np.zeros(n, np.int64)
        self.features = np.zeros((n, BELIEF_DIM), np.float32)
        d = env.single_observation_space.shape[0]
        self.single_observation_space = spaces.Box(0.0, 1.0, (d + BELIEF_DIM,), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, n)

    def _begin(self, i):
        self._filters[i].reset(self._red_bits, self._leaderboard, int(self._episodes[i]) * 1024 + i)
        self._episodes[i] += 1
        self.features[i] = self._filters[i].belief_features()

    def _observe(self, i, action, obs):
        f = self._filters[i]
        f.observe(int(action), np.ascontiguousarray(obs[:OBS_DIM], np.float32))
        return f.belief_features()

    def observations(self, obs):
        return np.concatenate((np.asarray(obs, np.float32), self.features), axis=1)

    def reset(self, *, seed=None, options=None):
        mask = _reset_mask(options)
        obs, info = self.env.reset(seed=seed, options=options)
        for i in range(self.num_envs):
            if mask is None or mask[i]:
                self._begin(i)
                self._resets_next[i] = False
        return self.observations(obs), info

    def step(self, actions):
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        done = np.asarray(terminations) | np.asarray(truncations)
        acts = np.asarray(actions).reshape(self.num_envs)
        same_step = self._mode is AutoresetMode.SAME_STEP
        last = info["final_obs"].copy() if same_step and done.any() else None
        for i in range(self.num_envs):
            if self._resets_next[i]:   # this step started env i's next episode
                self._begin(i)
            elif same_step and done[i]:
                assert last is not None   # same_step and done.any()
                final = self._observe(i, acts[i], last[i])
                last[i] = np.concatenate((np.asarray(last[i], np.float32), final))
                self._begin(i)
            else:
                self.features[i] = self._observe(i, acts[i], obs[i])
        if self._mode is AutoresetMode.NEXT_STEP:
            self._resets_next[:] = done
        if last is not None:
            info["final_obs"] = last
        return self.observations(obs), rewards, terminations, truncations, info
