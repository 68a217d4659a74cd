"""Trajectory arrays: allocation (Python owns every buffer), the compiled buffer, its numpy
reference, and the flat arrays a buffer's rows are flattened into (wfrl.ppo.batch turns those into
the learner's batch).

Array names are the same in every layer: obs, actions, logprobs, values, rewards, dones,
red_access, lengths, and belief (the belief block of every step) in the buffers of a policy with
the belief input. Row r is written by one env; lengths[r] counts its valid steps.
"""
from __future__ import annotations

import numpy as np

from wfrl.envs.actions import N_HOSTS
from wfrl.envs.base import OBS_DIM
from wfrl.features import BELIEF_DIM

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


BELIEF_FIELD = (np.float32, (BELIEF_DIM,))


def traj_fields(net=None) -> dict:
    """The trajectory fields a buffer for network `net` (a NetSpec, or None) holds: TRAJ_FIELDS,
    "belief" for a network with the belief input, and a red's observation as "obs" for an
    attacker's network (NetSpec.red)."""
    if net is not None and bool(getattr(net, "red", False)):
        return {**TRAJ_FIELDS, "obs": (np.float32, (net.in_dim,))}
    if net is not None and bool(getattr(net, "belief", 0)):
        return {**TRAJ_FIELDS, "belief": BELIEF_FIELD}
    return TRAJ_FIELDS


def allocate_trajectory(n_rows: int, T: int, net=None) -> dict:
    arrays = {name: np.zeros((n_rows, T) + tail, dtype=dt)
              for name, (dt, tail) in traj_fields(net).items()}
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

    def push(self, row, obs, action, logprob, value, reward, done, red_access, belief=None):
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
        if belief is not None and "belief" in a:
            a["belief"][row, t] = belief
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


def allocate_flat(n: int, obs_dim: int = OBS_DIM) -> dict:
    return {"obs": np.empty((n, obs_dim), np.float32), "actions": np.empty(n, np.int32),
            "logprobs": np.empty(n, np.float32), "values": np.empty(n, np.float32),
            "advantages": np.empty(n, np.float32), "returns": np.empty(n, np.float32),
            "rows": np.empty(n, np.int32)}
