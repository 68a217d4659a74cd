"""Workflow conditioning for any RL library: the observation carries the workflow, the reward the
alignment term, the info the episode's compliance, by the rules of wfrl's own trainer.

    env = WorkflowWrapper(wfrl.envs.make(), "critical_first", lam=30.0)
    venv = VecWorkflowWrapper(wfrl.envs.make_vec(64), "critical_first", lam=30.0)

What the wrappers add, per step (wfrl.workflow has the rules; the compiled rollout loop,
csrc/wfrl_rollout.h, applies them when wfrl trains):
  * observation: the env's observation followed by the workflow's 25-dim one-hot
    (Workflow.onehot); over wfrl.envs.memory_env.MemoryWrapper that is obs ⊕ memory block ⊕
    one-hot, the input of wfrl's own policy network;
  * reward: the env's reward plus the alignment reward λ·Δ(compliance rate) of the step's action,
    judged against red's access when the action was chosen, plus −0.2·λ on the last step of an
    episode without any fix;
  * info: "env_reward" (the env's own reward) and "alignment" (this step's alignment reward),
    which add up to the returned reward; "compliance" (the episode's compliance rate so far; 0.5
    before its first fix), "fixes", "compliant" (counts so far) and "episode_alignment"
    (alignment summed over the episode so far), of the episode the returned observation belongs
    to (with SAME_STEP autoreset the ended episode's are in info["final_info"]).

The alignment reward comes from wfrl._core.compliance_step_batch: the rollout loop's compiled
compliance step (csrc/wfrl_compliance.h) applied to a batch of envs, each with its own workflow.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorWrapper
from gymnasium.vector.utils import batch_space

from wfrl.envs.actions import N_HOSTS
from wfrl.envs.base import check_cage2_box
from wfrl.errors import UserError
from wfrl.workflow import COND_DIM, N_TYPES, Workflow

# wfrl train's default --alignment-lambda
DEFAULT_LAMBDA = 30.0
STAT_KEYS = ("env_reward", "alignment", "compliance", "fixes", "compliant", "episode_alignment")


def as_workflow(workflow) -> Workflow:
    """A Workflow from a Workflow, its text (`a,b,c,d,e`, `a → b → …`, a canonical name) or its
    index 0..119."""
    if isinstance(workflow, Workflow):
        return workflow
    if isinstance(workflow, str):
        return Workflow.parse(workflow)
    try:
        return Workflow.from_index(operator.index(workflow))
    except TypeError:
        raise UserError(f"not a workflow: {workflow!r} (a Workflow, its text or its index)") \
            from None


def _check_lambda(lam) -> float:
    lam = float(lam)
    if not math.isfinite(lam) or lam < 0:
        raise UserError(f"the alignment weight lam must be finite and >= 0, got {lam}")
    return lam


def _check_not_conditioned(env, what):
    """Refuse a second workflow wrapper (its alignment reward would be added twice)."""
    for _ in range(64):
        if isinstance(env, (WorkflowWrapper, VecWorkflowWrapper)):
            raise UserError(f"{what}: the env is already conditioned on a workflow "
                            f"({env.__class__.__name__} inside)")
        env = getattr(env, "env", None)
        if env is None:
            return


def compliance_rate(fixes, compliant):
    """The compliance rate of episodes with these counts (0.5 before a first fix), as
    wfrl.workflow.ComplianceTracker.rate."""
    fixes = np.asarray(fixes)
    return np.where(fixes > 0, np.asarray(compliant) / np.maximum(fixes, 1), 0.5)


class _Tracker:
    """Compliance state of n episodes in progress, each with its workflow; all arrays the compiled
    step reads and writes."""

    def __init__(self, workflows, lam, count_foothold):
        n = len(workflows)
        self.n = n
        self.cond = np.zeros((n, COND_DIM), np.float32)
        self.rank = np.zeros((n, N_TYPES), np.uint8)
        self.foothold = np.full(n, bool(count_foothold), np.uint8)
        self.lam = np.full(n, lam, np.float32)
        self.workflows: list[Workflow] = list(workflows)   # each set again, with its cond and rank
        for i, w in enumerate(workflows):
            self.set(i, w)
        self.fixes = np.zeros(n, np.int32)
        self.compliant = np.zeros(n, np.int32)
        self.episode_alignment = np.zeros(n, np.float64)
        self.bonus = np.zeros(n, np.float32)
        self.access = np.zeros((n, N_HOSTS), np.uint8)  # red's access when the next action is chosen
        self.done = np.zeros(n, np.uint8)

    def set(self, i, workflow):
        self.workflows[i] = workflow
        self.cond[i] = workflow.onehot()
        self.rank[i] = workflow.rank

    def begin(self, mask=None):
        """Start new episodes (all, or where mask)."""
        sel = slice(None) if mask is None else mask
        self.fixes[sel] = 0
        self.compliant[sel] = 0
        self.episode_alignment[sel] = 0.0

    def step(self, actions, done):
        from wfrl._core import compliance_step_batch
        self.done[:] = done
        compliance_step_batch(actions, self.access, self.rank, self.foothold, self.lam, self.done,
                              self.fixes, self.compliant, self.bonus)
        self.episode_alignment += self.bonus
        return self.bonus

    def stats(self, env_reward):
        return {"env_reward": env_reward, "alignment": self.bonus.copy(),
                "compliance": compliance_rate(self.fixes, self.compliant),
                "fixes": self.fixes.copy(), "compliant": self.compliant.copy(),
                "episode_alignment": self.episode_alignment.copy()}


class WorkflowWrapper(gym.Wrapper):
    """A single CAGE2 env (wfrl.envs.make, or gymnasium.make("wfrl/CAGE2-v0")) conditioned on one
    workflow: observations Box(0, 1, (d + 25,)) (d = 52 on the bare env), reward env +
    alignment, compliance in info (see the module docstring). lam: the alignment weight λ (wfrl
    train's default 30); count_foothold: count red's User0 foothold as compromised (the original
    system's rule)."""

    def __init__(self, env, workflow, lam: float = DEFAULT_LAMBDA, count_foothold: bool = False):
        super().__init__(env)
        _check_not_conditioned(env, "WorkflowWrapper")
        d = check_cage2_box(env.observation_space, "WorkflowWrapper")
        self.workflow = as_workflow(workflow)
        self.lam = _check_lambda(lam)
        self.count_foothold = bool(count_foothold)
        self.observation_space = spaces.Box(0.0, 1.0, (d + COND_DIM,), dtype=np.float32)
        self._t = _Tracker([self.workflow], self.lam, self.count_foothold)
        self._cond = self._t.cond[0].copy()
        self._action = np.zeros(1, np.int32)

    def observation(self, obs):
        return np.concatenate((obs, self._cond))

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        tr = self._t
        tr.begin()
        tr.access[0] = info["red_access"]
        tr.bonus[0] = 0.0
        info.update({k: v[0].item() for k, v in tr.stats(np.zeros(1)).items()})
        return self.observation(obs), info

    def step(self, action):
        reward: Any   # the wrapped env's reward, a Python or numpy number
        obs, reward, terminated, truncated, info = self.env.step(action)
        tr = self._t
        self._action[0] = action
        bonus = float(tr.step(self._action, terminated or truncated)[0])
        tr.access[0] = info["red_access"]
        info.update({"env_reward": reward, "alignment": bonus,
                     "compliance": float(compliance_rate(tr.fixes, tr.compliant)[0]),
                     "fixes": int(tr.fixes[0]), "compliant": int(tr.compliant[0]),
                     "episode_alignment": float(tr.episode_alignment[0])})
        return self.observation(obs), reward + bonus, terminated, truncated, info


class VecWorkflowWrapper(VectorWrapper):
    """A CAGE2 VectorEnv (wfrl.envs.make_vec, gymnasium.make_vec("wfrl/CAGE2-v0", ...), or any
    gymnasium VectorEnv of CAGE2 envs) conditioned on workflows, one per env: observations
    [n, d + 25], rewards env + alignment, compliance in infos as [n] arrays (see the module
    docstring). Follows the env's autoreset mode: with NEXT_STEP the reset step scores nothing
    and starts the new episode's counts; with SAME_STEP the ended episode's statistics are in
    infos["final_info"]; with DISABLED an episode's counts restart at reset(options=
    {"reset_mask": ...}).

    workflow: one workflow for all envs or a list/tuple of n (Workflow, text or index);
    set_workflow changes an env's workflow (do it at an episode boundary)."""

    def __init__(self, env, workflow, lam: float = DEFAULT_LAMBDA, count_foothold: bool = False):
        super().__init__(env)
        n = env.num_envs
        _check_not_conditioned(env, "VecWorkflowWrapper")
        d = check_cage2_box(env.single_observation_space, "VecWorkflowWrapper")
        if isinstance(workflow, (list, tuple)):
            workflows = [as_workflow(w) for w in workflow]
            if len(workflows) != n:
                raise UserError(f"{len(workflows)} workflows for {n} envs (give one or {n})")
        else:
            workflows = [as_workflow(workflow)] * n
        self.lam = _check_lambda(lam)
        self.count_foothold = bool(count_foothold)
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
        self.single_observation_space = spaces.Box(0.0, 1.0, (d + COND_DIM,), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, n)
        self._t = _Tracker(workflows, self.lam, self.count_foothold)
        self._autoreset = np.zeros(n, np.bool_)
        self._mask = np.ones(n, np.bool_)

    @property
    def workflows(self) -> tuple[Workflow, ...]:
        return tuple(self._t.workflows)

    def set_workflow(self, index, workflow):
        """Give env `index` (an int, or a bool mask [n]) another workflow."""
        w = as_workflow(workflow)
        for i in np.flatnonzero(_as_mask(index, self.num_envs)):
            self._t.set(int(i), w)

    def observations(self, obs):
        return np.concatenate((obs, self._t.cond), axis=1)

    def _with_stats(self, info, env_reward):
        for k, v in self._t.stats(env_reward).items():
            info[k] = v
            info["_" + k] = self._mask.copy()
        return info

    def reset(self, *, seed=None, options=None):
        # read before the inner reset: gymnasium's own vector envs take "reset_mask" out of the
        # options they are given
        mask = None if options is None else options.get("reset_mask")
        mask = None if mask is None else np.array(mask, np.bool_)
        obs, info = self.env.reset(seed=seed, options=options)
        tr = self._t
        tr.begin(mask)
        sel = slice(None) if mask is None else mask
        tr.access[sel] = info["red_access"][sel]
        tr.bonus[sel] = 0.0
        self._autoreset[sel] = False
        return self.observations(obs), self._with_stats(info, np.zeros(self.num_envs))

    def step(self, actions):
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        tr = self._t
        acts = np.asarray(actions, dtype=np.int32)
        done = terminations | truncations
        if self.autoreset_mode is AutoresetMode.NEXT_STEP and self._autoreset.any():
            # these envs were reset by this step: no action was played, a new episode starts
            acts = np.where(self._autoreset, np.int32(-1), acts)
            tr.begin(self._autoreset)
        bonus = tr.step(acts, done)
        if self.autoreset_mode is AutoresetMode.SAME_STEP and done.any():
            final = info.setdefault("final_info", {})
            for k, v in tr.stats(np.asarray(rewards, np.float64)).items():
                final[k] = v
                final["_" + k] = done.copy()
            info["_final_info"] = done.copy()
            if "final_obs" in info:
                last = info["final_obs"].copy()
                for i in np.flatnonzero(done):
                    last[i] = np.concatenate((last[i], tr.cond[i]))
                info["final_obs"] = last
            tr.begin(done)
        elif self.autoreset_mode is AutoresetMode.NEXT_STEP:
            self._autoreset[:] = done
        tr.access[:] = info["red_access"]
        info = self._with_stats(info, np.asarray(rewards, np.float64).copy())
        return self.observations(obs), rewards + bonus, terminations, truncations, info


def _as_mask(index, n):
    if isinstance(index, np.ndarray) and index.dtype == np.bool_:
        if index.shape != (n,):
            raise UserError(f"a mask of {index.shape} for {n} envs")
        return index
    i = operator.index(index)
    if not 0 <= i < n:
        raise UserError(f"env {i} outside [0, {n})")
    m = np.zeros(n, np.bool_)
    m[i] = True
    return m
