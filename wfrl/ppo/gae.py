"""GAE: the plain numpy reference and the compiled routine behind one call.

Layout ([rows, T] arrays, dones[t] = 1 ends an episode at t, last_values bootstrap rows that end
without a done) is documented in csrc/wfrl_gae.h.
"""
from __future__ import annotations

import numpy as np


def gae_reference(rewards, values, dones, lengths, last_values, gamma, lam):
    """Straightforward loop; returns (advantages, returns) as float32 [rows, T], zero past lengths."""
    n, T = rewards.shape
    adv = np.zeros((n, T), dtype=np.float32)
    ret = np.zeros((n, T), dtype=np.float32)
    gamma = np.float32(gamma)
    lam = np.float32(lam)
    for r in range(n):
        next_value = np.float32(last_values[r])
        running = np.float32(0.0)
        for t in range(int(lengths[r]) - 1, -1, -1):
            nonterminal = np.float32(0.0 if dones[r, t] else 1.0)
            delta = rewards[r, t] + gamma * next_value * nonterminal - values[r, t]
            running = delta + gamma * lam * nonterminal * running
            adv[r, t] = running
            ret[r, t] = running + values[r, t]
            next_value = values[r, t]
    return adv, ret


def gae(rewards, values, dones, lengths, last_values, gamma, lam):
    """Compiled GAE; same contract and result as gae_reference."""
    import wfrl._core as _core
    n, T = rewards.shape
    adv = np.zeros((n, T), dtype=np.float32)
    ret = np.zeros((n, T), dtype=np.float32)
    _core.gae(np.ascontiguousarray(rewards, np.float32), np.ascontiguousarray(values, np.float32),
              np.ascontiguousarray(dones, np.uint8), np.ascontiguousarray(lengths, np.int32),
              np.ascontiguousarray(last_values, np.float32), float(gamma), float(lam), adv, ret)
    return adv, ret
