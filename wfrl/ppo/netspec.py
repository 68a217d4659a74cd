"""The actor-critic's shapes and its numpy twin, without torch (rollout workers never import it).

Flat weights (what workers receive): float32, each weight row-major [out, in] followed by its bias
[out], in this order:
    actor:  W1 [H, I] b1 [H]  W2 [H, H] b2 [H]  W3 [145, H] b3 [145]
    critic: W1 [H, I] b1 [H]  W2 [H, H] b2 [H]  W3 [1, H]   b3 [1]
This is exactly the order of wfrl.ppo.policy.ActorCritic.parameters().

The policy input, in this order (each block only where the NetSpec turns it on):
    observation 52 ⊕ [memory block 66] ⊕ [truth block 39] ⊕ [belief block 42] ⊕ workflow one-hot 25
so I is 77, 143 with memory, 116 with truth, 182 with both, 185 with memory and the belief. The
memory block (wfrl.features.MemoryTracker, csrc/wfrl_memory.h) is built from what the defender
saw and did; the truth block (wfrl.features.truth_features, csrc/wfrl_truth.h) is red's true
access per host, which no defender sees: a network with it is the full-information bound
(docs/limit.md), not a deployable defender. The belief block (wfrl.features.belief_features,
csrc/wfrl_belief.h) is what a particle filter of `belief` particles, fed the same observations
and actions, believes about red: a deployable defender's input.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from wfrl.envs.actions import N_ACTIONS
from wfrl.envs.base import OBS_DIM
from wfrl.features import BELIEF_DIM, MEM_DIM, TRUTH_DIM
from wfrl.workflow import COND_DIM

IN_DIM = OBS_DIM + COND_DIM


@dataclass(frozen=True)
class NetSpec:
    """What a policy network expects: its width and its input features. Checkpoints record it."""

    hidden: int = 64
    memory: bool = False
    mask: bool = False
    truth_input: bool = False
    belief: int = 0          # particles of the belief block (0: no belief input)
    belief_reds: int = 7     # the red kinds the particles may be (PLAN_RED_* bits; 7: all three)
    # an attacker's network (wfrl.training.attack): its input is red's observation (RED_OBS_DIM,
    # wfrl.envs.duel) and its actions red's, the first RED_N_ACTIONS of the head (the rest masked)
    red: bool = False

    @property
    def in_dim(self) -> int:
        if self.red:
            from wfrl.envs.duel import RED_OBS_DIM
            return RED_OBS_DIM
        return (IN_DIM + (MEM_DIM if self.memory else 0) + (TRUTH_DIM if self.truth_input else 0)
                + (BELIEF_DIM if self.belief else 0))

    @property
    def n_params(self) -> int:
        return n_params(self.hidden, self.in_dim)

    def to_dict(self) -> dict:
        """The record a checkpoint keeps (`red` only for a red's network, so a defender's
        record is what it was before red networks existed)."""
        d = asdict(self)
        if not self.red:
            del d["red"]
        return d

    def describe(self) -> str:
        """e.g. "hidden 64, memory on, mask on" (", truth input on", ", belief 32 particles
        (mixture)" where they are; "red, hidden 64" for an attacker's)."""
        on = {True: "on", False: "off"}
        if self.red:
            return f"red, hidden {self.hidden}"
        return (f"hidden {self.hidden}, memory {on[self.memory]}, mask {on[self.mask]}"
                + (", truth input on" if self.truth_input else "")
                + (f", belief {self.belief} particles ({belief_red_name(self.belief_reds)})"
                   if self.belief else ""))


def belief_red_name(bits: int) -> str:
    """The name of a belief red set: mixture (all three kinds) or the one red agent."""
    from wfrl.features import MIXTURE_RED_BITS, PARTICLE_RED_BITS
    if bits == MIXTURE_RED_BITS:
        return "mixture"
    return next((name for name, b in PARTICLE_RED_BITS.items() if b == bits), f"bits {bits}")


def as_netspec(net) -> NetSpec:
    """A NetSpec from a NetSpec or a plain hidden width (the observation-only network)."""
    return net if isinstance(net, NetSpec) else NetSpec(hidden=int(net))


def layer_shapes(hidden: int, in_dim: int = IN_DIM):
    """[(out, in)] for actor layers then critic layers, in flat-weights order."""
    H = hidden
    return [(H, in_dim), (H, H), (N_ACTIONS, H), (H, in_dim), (H, H), (1, H)]


def n_params(hidden: int, in_dim: int = IN_DIM) -> int:
    return sum(o * i + o for o, i in layer_shapes(hidden, in_dim))



class NumpyPolicy:
    """The same actor-critic evaluated with numpy from flat weights, one observation at a time.

    This is what rollout loops use: no torch, no autograd, a few microseconds per step.
    The arrays are views into `flat`, so publishing new weights in place updates the policy.
    """

    def __init__(self, flat: np.ndarray, hidden: int, in_dim: int = IN_DIM):
        if flat.dtype != np.float32 or flat.shape != (n_params(hidden, in_dim),):
            raise ValueError(f"flat weights must be float32[{n_params(hidden, in_dim)}] for "
                             f"hidden={hidden}, input {in_dim}")
        self.hidden = hidden
        self.in_dim = in_dim
        views, k = [], 0
        for o, i in layer_shapes(hidden, in_dim):
            views.append((flat[k:k + o * i].reshape(o, i), flat[k + o * i:k + o * i + o]))
            k += o * i + o
        self._a, self._c = views[:3], views[3:]

    def forward(self, x: np.ndarray):
        """x float32[in_dim] → (logits float32[145], value float)."""
        (aw1, ab1), (aw2, ab2), (aw3, ab3) = self._a
        (cw1, cb1), (cw2, cb2), (cw3, cb3) = self._c
        ha = np.tanh(aw2 @ np.tanh(aw1 @ x + ab1) + ab2)
        hc = np.tanh(cw2 @ np.tanh(cw1 @ x + cb1) + cb2)
        return aw3 @ ha + ab3, float((cw3 @ hc + cb3)[0])

    def batch_logits(self, x: np.ndarray) -> np.ndarray:
        """The actor's logits float32 [N, 145] for N inputs x [N, in_dim] at once."""
        (aw1, ab1), (aw2, ab2), (aw3, ab3) = self._a
        return np.tanh(np.tanh(x @ aw1.T + ab1) @ aw2.T + ab2) @ aw3.T + ab3

    def act(self, x: np.ndarray, rng: np.random.Generator, greedy: bool = False):
        """Sample (or take the argmax) → (action, log-probability, value)."""
        logits, value = self.forward(x)
        z = logits - logits.max()
        p = np.exp(z)
        total = p.sum()
        if greedy:
            a = int(np.argmax(z))
        else:
            a = int(np.searchsorted(np.cumsum(p), rng.random() * total, side="right"))
            a = min(a, N_ACTIONS - 1)
        return a, float(z[a] - np.log(total)), value
