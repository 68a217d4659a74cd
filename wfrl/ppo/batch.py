"""From a filled trajectory buffer to the learner's flat batch: GAE (compiled) over the buffer's
rows, flattened, with each step's full policy input (observation, memory, truth and belief blocks if
the network has them, workflow conditioning) and its allowed actions if the network masks them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from wfrl._core import memory_rows, truth_rows
from wfrl.collect.buffer import allocate_flat
from wfrl.ppo.gae import gae
from wfrl.ppo.netspec import as_netspec
from wfrl.workflow import is_fix


def reference_memory_rows(obs, actions, lengths, memory=True, mask=True):
    """Plain-Python twin of wfrl._core.memory_rows: wfrl.features.memory_and_masks over the rows,
    flattened to the valid steps (row by row)."""
    from wfrl.features import memory_and_masks
    rows = obs.shape[0]
    valid = np.arange(obs.shape[1])[None, :] < np.asarray(lengths)[:rows, None]
    feats, allowed = memory_and_masks(obs, actions, memory, mask)
    return (feats[valid] if memory else None), (allowed[valid].astype(np.uint8) if mask else None)


def belief_rows(belief, lengths):
    """The recorded belief blocks of the valid steps, row-major (the order of flatten)."""
    valid = np.arange(belief.shape[1])[None, :] < np.asarray(lengths)[:, None]
    return belief[valid]


def reference_truth_rows(red_access, lengths):
    """Plain-Python twin of wfrl._core.truth_rows: wfrl.features.truth_features of the valid
    steps, row by row."""
    from wfrl.features import truth_features
    rows = red_access.shape[0]
    valid = np.arange(red_access.shape[1])[None, :] < np.asarray(lengths)[:rows, None]
    return truth_features(red_access[valid])


@dataclass
class Batch:
    """Flat training batch; obs is the full policy input (observation, memory block and truth
    block if any, workflow conditioning)."""

    obs: np.ndarray         # float32 [N, in_dim]
    actions: np.ndarray     # int32 [N]
    logprobs: np.ndarray    # float32 [N] at collection time
    values: np.ndarray      # float32 [N] at collection time
    advantages: np.ndarray  # float32 [N]
    returns: np.ndarray     # float32 [N]
    masks: np.ndarray | None = None  # bool [N, 145], allowed actions (None: all)
    # what the learner's privileged parts read (wfrl.ppo.privileged), where asked for:
    truth: np.ndarray | None = None          # float32 [N, 39], the truth block of every step
    rewards: np.ndarray | None = None        # float32 [N], the rewards GAE ran on
    lengths: np.ndarray | None = None        # int32 [rows], each row's episode length
    teacher_probs: np.ndarray | None = None  # float32 [N, 145], the teacher's distribution

    def __len__(self):
        return len(self.actions)


def with_first_fix_bonus(rewards, actions, lengths, bonus: float) -> np.ndarray:
    """The rewards [n_rows, T] with `bonus` added at each row's first fix (Remove or Restore) within
    its length: −FIRST_FIX_BONUS·λ turns the compiled loop's alignment rule into the one without
    the first-fix bonus (wfrl.workflow). Returns a new array; rows without a fix are unchanged."""
    out = np.array(rewards, dtype=np.float32, copy=True)
    fix = is_fix(actions)
    fix &= np.arange(fix.shape[1])[None, :] < np.asarray(lengths)[:, None]
    rows = np.flatnonzero(fix.any(axis=1))
    out[rows, fix[rows].argmax(axis=1)] += np.float32(bonus)
    return out


def to_batch(buffer, row_cond: np.ndarray, gamma: float, lam: float, net=None,
             reference: bool = False, first_fix: float = 0.0, privileged: bool = False,
             teacher=None) -> Batch:
    """GAE (compiled) over the buffer's rows, flattened into a learner Batch.

    Rows hold complete episodes (done at their last step), so nothing is bootstrapped.
    row_cond: float32 [n_rows, 25], the workflow one-hot each row was collected under.
    net: the policy's NetSpec (or a hidden width); with `memory` the memory block of every step is
    rebuilt from the row's observations and actions by the compiled memory (the rollout loop's
    own code; reference_memory_rows is its plain-Python twin), with `mask` the allowed actions
    likewise, with `truth_input` the truth block from the red access the buffer recorded at every
    step (the compiled truth_rows; reference_truth_rows is its twin), with `belief` the belief block
    the buffer recorded with every step (the rollout loop's filter ran once). reference=True builds them
    with the plain-Python twins instead (the original path, kept for `wfrl bench train`'s
    comparison). first_fix: reward added at each episode's first fix before GAE
    (with_first_fix_bonus; 0 = the compiled loop's rule, with the bonus). privileged: also the
    truth rows, the rewards and the rows' lengths (a privileged critic's GAE); teacher (a
    wfrl.ppo.privileged.Teacher): also its action distribution at every step.
    """
    net = as_netspec(net if net is not None else 64)
    a = buffer.arrays
    last_values = np.zeros(buffer.n_rows, dtype=np.float32)
    rewards = a["rewards"]
    if first_fix:
        rewards = with_first_fix_bonus(rewards, a["actions"], a["lengths"], first_fix)
    adv, ret = gae(rewards, a["values"], a["dones"], a["lengths"], last_values, gamma, lam)
    flat = allocate_flat(buffer.count())
    n = buffer.flatten(adv, ret, flat)
    parts = [flat["obs"][:n]]
    masks = feats = allowed = truth = None
    t_net = None if teacher is None else teacher.net
    want_memory = net.memory or (t_net is not None and t_net.memory)
    want_mask = net.mask or (t_net is not None and t_net.mask)
    if want_memory or want_mask:
        rows_fn = reference_memory_rows if reference else memory_rows
        feats, allowed = rows_fn(a["obs"], a["actions"], a["lengths"], want_memory, want_mask)
        if net.memory:
            parts.append(feats)
        if net.mask:
            masks = allowed.view(bool)
    if net.truth_input or privileged or teacher is not None:
        rows_fn = reference_truth_rows if reference else truth_rows
        truth = rows_fn(a["red_access"], a["lengths"])
    if net.truth_input:
        parts.append(truth)
    if net.belief:
        if "belief" not in a:
            raise ValueError("to_batch: a belief network needs a buffer with the belief field")
        parts.append(belief_rows(a["belief"], a["lengths"]))
    cond = row_cond[flat["rows"][:n]]
    parts.append(cond)
    obs = np.concatenate(parts, axis=1)
    extra: dict = {}
    if privileged:
        valid = np.arange(rewards.shape[1])[None, :] < np.asarray(a["lengths"])[:, None]
        extra.update(truth=truth, rewards=np.asarray(rewards, np.float32)[valid],
                     lengths=np.array(a["lengths"], np.int32))
    if teacher is not None:
        assert t_net is not None   # (teacher.net)
        t_in = np.concatenate([flat["obs"][:n]] + ([feats] if t_net.memory else [])
                              + [truth, cond], axis=1)
        # (t_net.mask: want_mask, so the rows gave `allowed`)
        extra["teacher_probs"] = teacher.probs(
            t_in, cast(np.ndarray, allowed).view(bool) if t_net.mask else None)
    return Batch(obs=obs, actions=flat["actions"][:n], logprobs=flat["logprobs"][:n],
                 values=flat["values"][:n], advantages=flat["advantages"][:n],
                 returns=flat["returns"][:n], masks=masks, **extra)
