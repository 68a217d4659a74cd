"""The order-conditioned actor-critic in torch (learning).

Input: obs(52) ⊕ [memory block(66)] ⊕ [truth block(39)] ⊕ workflow one-hot(25)
(wfrl.ppo.netspec). Two separate tanh MLPs of `hidden` units: actor → 145 logits, critic → 1
value. The flat-weights layout and the numpy twin used by rollouts live in wfrl.ppo.netspec (torch-free).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from wfrl.envs.actions import N_ACTIONS
from wfrl.ppo.netspec import IN_DIM, n_params


def mlp(out_dim: int, hidden: int, in_dim: int) -> nn.Sequential:
    """Two tanh layers of `hidden` units and a linear output: every network of the learner."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, out_dim))


def init_mlp(seq: nn.Sequential, gain: float) -> None:
    """Orthogonal weights (gain √2 in the hidden layers, `gain` in the output) and zero biases."""
    for i, layer in enumerate(m for m in seq if isinstance(m, nn.Linear)):
        nn.init.orthogonal_(layer.weight, gain if i == 2 else np.sqrt(2))
        nn.init.zeros_(layer.bias)


class ActorCritic(nn.Module):
    def __init__(self, hidden: int = 64, in_dim: int = IN_DIM):
        super().__init__()
        self.hidden = hidden
        self.in_dim = in_dim
        self.actor = mlp(N_ACTIONS, hidden, in_dim)
        self.critic = mlp(1, hidden, in_dim)
        # Small last-layer gains: a near-uniform initial policy and near-zero initial values.
        init_mlp(self.actor, 0.01)
        init_mlp(self.critic, 1.0)

    def forward(self, x: torch.Tensor):
        return self.actor(x), self.critic(x).squeeze(-1)

    def flat_weights(self) -> np.ndarray:
        with torch.no_grad():
            return torch.nn.utils.parameters_to_vector(self.parameters()).numpy().astype(
                np.float32, copy=True)

    def load_flat_weights(self, flat: np.ndarray) -> None:
        if flat.shape != (n_params(self.hidden, self.in_dim),):
            raise ValueError(f"flat weights of length {flat.shape} do not fit hidden={self.hidden}"
                             f", input {self.in_dim}")
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(torch.as_tensor(flat, dtype=torch.float32),
                                                self.parameters())


