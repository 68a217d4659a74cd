"""Trajectory arrays: allocation (Python owns every buffer), the compiled buffer, its numpy
reference, and the step from a filled buffer to the learner's flat batch.

Array names are the same in every layer: obs, actions, logprobs, values, rewards, dones,
red_access, lengths. Row r is written by one env; lengths[r] counts its valid steps.
"""
from __future__ import annotations

import numpy as np

from wfrl.envs.base import N_HOSTS, OBS_DIM

TRAJ_FIELDS = {
    # name: (dtype, trailing shape)
    "obs": (np.float32, (OBS_DIM,)),
    "actions": (np.int32, ()),
    "logprobs": (np.float32, ()),
    "values": (np.float32, ()),
    "rewards": (np.float32, ()),
    "dones": (np.uint8, ()),
    "red_access": (np.uint8, (N_HOSTS,)),
}


def allocate_trajectory(n_rows: int, T: int) -> dict:
    arrays = {name: np.zeros((n_rows, T) + tail, dtype=dt) for name, (dt, tail) in TRAJ_FIELDS.items()}
    arrays["lengths"] = np.zeros(n_rows, dtype=np.int32)
    return arrays


def compiled_buffer(arrays: dict):
    from wfrl._core import TrajectoryBuffer
    return TrajectoryBuffer(arrays)


class ReferenceTrajectoryBuffer:
    """numpy twin of wfrl._core.TrajectoryBuffer (same methods, same results)."""

    def __init__(self, arrays: dict):
        self.arrays = arrays
        self.n_rows, self.T = arrays["obs"].shape[:2]

    def push(self, row, obs, action, logprob, value, reward, done, red_access):
        a = self.arrays
        t = int(a["lengths"][row])
        if t >= self.T:
            raise IndexError(f"row {row} is full ({self.T} steps)")
        a["obs"][row, t] = obs
        a["actions"][row, t] = action
        a["logprobs"][row, t] = logprob
        a["values"][row, t] = value
        a["rewards"][row, t] = reward
        a["dones"][row, t] = done
        a["red_access"][row, t] = red_access
        a["lengths"][row] = t + 1
        return t

    def clear(self):
        self.arrays["lengths"][:] = 0

    def count(self):
        return int(self.arrays["lengths"].sum())

    def flatten(self, adv, ret, out):
        lengths = self.arrays["lengths"]
        mask = np.arange(self.T)[None, :] < lengths[:, None]
        n = int(mask.sum())
        out["obs"][:n] = self.arrays["obs"][mask]
        for name in ("actions", "logprobs", "values"):
            out[name][:n] = self.arrays[name][mask]
        out["advantages"][:n] = adv[mask]
        out["returns"][:n] = ret[mask]
        out["rows"][:n] = np.nonzero(mask)[0]
        return n


def allocate_flat(n: int) -> dict:
    return {"obs": np.empty((n, OBS_DIM), np.float32), "actions": np.empty(n, np.int32),
            "logprobs": np.empty(n, np.float32), "values": np.empty(n, np.float32),
            "advantages": np.empty(n, np.float32), "returns": np.empty(n, np.float32),
            "rows": np.empty(n, np.int32)}


def to_batch(buffer, row_cond: np.ndarray, gamma: float, lam: float, net=None):
    """GAE (compiled) over the buffer's rows, flattened into a learner Batch.

    Rows hold complete episodes (done at their last step), so nothing is bootstrapped.
    row_cond: float32 [n_rows, 25], the workflow one-hot each row was collected under.
    net: the policy's NetSpec (or a hidden width); with `memory` the memory block of every step is
    rebuilt from the row's observations and actions (wfrl.features, the twin of what the rollout
    loop computed), with `mask` the allowed actions likewise.
    """
    from wfrl.features import memory_and_masks
    from wfrl.ppo.gae import gae
    from wfrl.ppo.learner import Batch
    from wfrl.ppo.netspec import as_netspec

    net = as_netspec(net if net is not None else 64)
    a = buffer.arrays
    last_values = np.zeros(buffer.n_rows, dtype=np.float32)
    adv, ret = gae(a["rewards"], a["values"], a["dones"], a["lengths"], last_values, gamma, lam)
    flat = allocate_flat(buffer.count())
    n = buffer.flatten(adv, ret, flat)
    parts = [flat["obs"][:n]]
    masks = None
    if net.memory or net.mask:
        used = int(a["lengths"].astype(bool).nonzero()[0].max()) + 1 if n else 0
        T = buffer.T
        valid = np.arange(T)[None, :] < a["lengths"][:used, None]
        feats, allowed = memory_and_masks(a["obs"][:used], a["actions"][:used], net.memory,
                                          net.mask)
        if net.memory:
            parts.append(feats[valid])
        if net.mask:
            masks = allowed[valid]
    parts.append(row_cond[flat["rows"][:n]])
    obs = np.concatenate(parts, axis=1)
    return Batch(obs=obs, actions=flat["actions"][:n], logprobs=flat["logprobs"][:n],
                 values=flat["values"][:n], advantages=flat["advantages"][:n],
                 returns=flat["returns"][:n], masks=masks)
