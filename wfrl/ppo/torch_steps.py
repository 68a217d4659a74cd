"""The update's steps in torch, where the compiled ones do not run (compiled=False, the joint
clip, the KL stop, a CPU without AVX-512): the backward pass written out by hand. Per minibatch
step the six matrix products of the forward pass and the ten of the backward go into buffers
kept between steps (torch.addmm/mm with out=), tanh' = 1 − h² is applied in place, and each
gradient lands directly in its parameter's .grad, where the gradient clip and fused Adam read it
as usual: no autograd graph is built, recorded or walked. With a _Compact plan the products
cover only the input columns and actions the batch uses. Also the autograd step these replaced
(manual=False), kept for comparison: the model's forward, the compiled policy head as an autograd
Function, loss.backward()."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from wfrl.envs.actions import N_ACTIONS
from wfrl.ppo.head import head_loss, head_pass
from wfrl.ppo.optim import clip_grad_norm
from wfrl.ppo.policy import ActorCritic

if TYPE_CHECKING:
    from wfrl.config.run import PPOConfig
    from wfrl.ppo.prepare import Compact


class Scratch:
    """What the hand-written backward keeps between minibatch steps: each layer's (weight, bias),
    every activation and every gradient with respect to one, for up to `rows` rows (a shorter
    minibatch uses the leading rows, still contiguous), and a .grad tensor on every parameter
    that the step overwrites in place (so Adam and the gradient clip read them as usual)."""

    def __init__(self, model: ActorCritic, rows: int):
        self.rows = rows
        linears = [m for seq in (model.actor, model.critic) for m in seq
                   if isinstance(m, torch.nn.Linear)]
        # (Any: every .grad is attached here, which the tensors' Optional .grad does not say)
        self.layers: list[tuple[Any, Any]] = [(m.weight, m.bias) for m in linears]
        self.params = [p for pair in self.layers for p in pair]
        self.attach_grads()
        H = model.hidden

        def buf(width):
            return torch.empty((rows, width), dtype=torch.float32)
        self.a1, self.a2, self.c1, self.c2 = buf(H), buf(H), buf(H), buf(H)
        self.da1, self.da2, self.dc1, self.dc2 = buf(H), buf(H), buf(H), buf(H)
        self.z, self.dz = buf(N_ACTIONS), buf(N_ACTIONS)
        self.v, self.dv = buf(1), buf(1)

    def attach_grads(self) -> None:
        attach_grads(self.params)


def attach_grads(params) -> None:
    """A zero .grad on every parameter that has none (after a zero_grad(set_to_none=True))."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)


def _backward(dout, h2, h1, x, w3, g3, gb3, w2, g2, gb2, g1, gb1, d2, d1) -> None:
    """Backward through one network (two tanh layers and a linear output), from d loss / d out:
    the gradients of the last layer, then tanh' = 1 - h² and the hidden layers, each product
    into its buffer."""
    torch.mm(dout.t(), h2, out=g3)
    torch.sum(dout, 0, out=gb3)
    torch.mm(dout, w3, out=d2)
    torch.ops.aten.tanh_backward.grad_input(d2, h2, grad_input=d2)
    torch.mm(d2.t(), h1, out=g2)
    torch.sum(d2, 0, out=gb2)
    torch.mm(d2, w2, out=d1)
    torch.ops.aten.tanh_backward.grad_input(d1, h1, grad_input=d1)
    torch.mm(d1.t(), x, out=g1)
    torch.sum(d1, 0, out=gb1)


class TorchSteps:
    """The torch minibatch steps (a mixin of PPOLearner: it reads self.cfg, self.model,
    self._plan, self.entropy_coef and steps through FusedAdamSteps)."""

    if TYPE_CHECKING:   # what it reads of PPOLearner and FusedAdamSteps
        cfg: PPOConfig
        model: ActorCritic
        opt: torch.optim.Adam
        private: bool
        entropy_coef: float
        _plan: Compact | None
        _scratch: Scratch | None

        def kl_exceeded(self, approx_kl: float) -> bool: ...

        def _adam_step(self) -> None: ...

        def _adam_params(self, params) -> None: ...

    def _torch_actor_step(self, x, mk, a, lp0, adv, params) -> tuple:
        """The actor's minibatch step in torch (under no_grad): its gradients, their clip and
        its Adam step; returns (surrogate, entropy, approximate KL, clipped share)."""
        got = self._actor_grads(x, mk, a, lp0, adv)
        clip_grad_norm(params, self.cfg.max_grad_norm, self.private)
        self._adam_params(params)
        return got

    def _torch_critic_step(self, x, ret, params) -> float:
        """The critic's minibatch step in torch (under no_grad), as _torch_actor_step; returns
        the value loss."""
        v_loss = self._critic_grads(x, ret)
        clip_grad_norm(params, self.cfg.max_grad_norm, self.private)
        self._adam_params(params)
        return v_loss

    def _ensure_scratch(self, rows: int) -> Scratch:
        s = self._scratch
        if s is None or s.rows < rows:
            s = self._scratch = Scratch(self.model, rows)
        s.attach_grads()      # after a zero_grad(set_to_none=True) elsewhere
        return s

    def _actor_grads(self, x, mk, a, lp0, adv):
        """The actor's part of a minibatch step (under no_grad): forward, the compiled policy head,
        the backward, its gradients written into the actor's .grad. Returns (surrogate, entropy,
        approximate KL, clipped share), or None on the KL stop (before any backward)."""
        cfg = self.cfg
        k = x.shape[0]
        s = self._scratch
        assert s is not None   # (made by _ensure_scratch before any torch step)
        (aw1, ab1), (aw2, ab2), (aw3, ab3) = s.layers[:3]
        plan = self._plan
        if plan is None:
            na = N_ACTIONS
            w1a, w3a, b3a = aw1, aw3, ab3
            g1a, g3a, gb3a = aw1.grad, aw3.grad, ab3.grad
        else:   # the used columns and actions only (_Compact)
            na = plan.n_actions
            w1a = torch.index_select(aw1, 1, plan.cols, out=plan.aw1)
            w3a = torch.index_select(aw3, 0, plan.acts, out=plan.aw3)
            b3a = torch.index_select(ab3, 0, plan.acts, out=plan.ab3)
            g1a, g3a, gb3a = plan.g_aw1, plan.g_aw3, plan.g_ab3
        a1, a2 = s.a1[:k], s.a2[:k]
        z = s.z.view(-1)[:k * na].view(k, na)
        torch.addmm(ab1, x, w1a.t(), out=a1).tanh_()
        torch.addmm(ab2, a1, aw2.t(), out=a2).tanh_()
        torch.addmm(b3a, a2, w3a.t(), out=z)
        # the head: loss statistics and d loss / d logits (the ent/pg part) in one compiled pass
        dz = s.dz.view(-1)[:k * na].view(k, na)
        pg, ent, kl, clipped = head_pass(
            z.numpy(), None if mk is None else mk.numpy(), a.numpy(), lp0.numpy(),
            np.ascontiguousarray(adv.numpy()), float(cfg.clip), float(self.entropy_coef),
            dz.numpy())
        if self.kl_exceeded(kl):
            return None
        _backward(dz, a2, a1, x, w3a, g3a, gb3a, aw2, aw2.grad, ab2.grad, g1a, ab1.grad,
                  s.da2[:k], s.da1[:k])
        if plan is not None:   # into the used columns and rows of the full gradients
            aw1.grad.index_copy_(1, plan.cols, g1a)
            aw3.grad.index_copy_(0, plan.acts, g3a)
            ab3.grad.index_copy_(0, plan.acts, gb3a)
        return pg, ent, kl, clipped

    def _critic_grads(self, x, ret) -> float:
        """The critic's part of a minibatch step (under no_grad): forward, the value loss
        0.5·mean((v - R)²) (returned) and its backward times value_coef into the critic's .grad."""
        cfg = self.cfg
        k = x.shape[0]
        s = self._scratch
        assert s is not None   # (made by _ensure_scratch before any torch step)
        (cw1, cb1), (cw2, cb2), (cw3, cb3) = s.layers[3:]
        plan = self._plan
        if plan is None:
            w1c, g1c = cw1, cw1.grad
        else:
            w1c = torch.index_select(cw1, 1, plan.cols, out=plan.cw1)
            g1c = plan.g_cw1
        c1, c2, v = s.c1[:k], s.c2[:k], s.v[:k]
        torch.addmm(cb1, x, w1c.t(), out=c1).tanh_()
        torch.addmm(cb2, c1, cw2.t(), out=c2).tanh_()
        torch.addmm(cb3, c2, cw3.t(), out=v)
        dv = s.dv[:k]
        torch.sub(v, ret.unsqueeze(1), out=dv)
        v_loss = float(0.5 * dv.pow(2).mean())     # as the autograd path computes it
        dv.mul_(cfg.value_coef / k)
        _backward(dv, c2, c1, x, cw3, cw3.grad, cb3.grad, cw2, cw2.grad, cb2.grad, g1c,
                  cb1.grad, s.dc2[:k], s.dc1[:k])
        if plan is not None:
            cw1.grad.index_copy_(1, plan.cols, g1c)
        return v_loss

    def _autograd_step(self, x, mk, a, lp0, adv, ret, groups):
        """One minibatch step through autograd (the default path before the hand-written
        backward; manual=False). Returns the minibatch's statistics, or None on the KL stop."""
        cfg = self.cfg
        logits, value = self.model(x)
        # surrogate - entropy bonus and its gradient w.r.t. the logits in one compiled pass
        head, head_stats = head_loss(logits, mk, a, lp0, adv, cfg.clip, self.entropy_coef)
        if self.kl_exceeded(float(head_stats[2])):
            return None
        v_loss = 0.5 * (value - ret).pow(2).mean()
        loss = head + cfg.value_coef * v_loss
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        for group in groups:
            torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm, foreach=True)
        self._adam_step()
        pg, ent, kl, clip_frac = head_stats
        return pg, float(v_loss.detach()), ent, kl, clip_frac   # STAT_NAMES order
