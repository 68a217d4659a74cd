"""The policy head of a PPO minibatch: from the actor's logits to the clipped surrogate minus the
entropy bonus, with its statistics.

`head_loss` computes the loss and its gradient with respect to the logits in one compiled pass
(csrc/wfrl_head.h; autograd only multiplies that gradient by the incoming one); `head_loss_reference`
is the same loss built from torch operations and differentiated by autograd — the plain twin,
held equal by tests/test_head.py. Both return (loss, stats) with stats the minibatch means of
(clipped surrogate, entropy, approximate KL, fraction of clipped ratios) as floats.

The mask follows the learner's convention: a masked action's logit is moved by MASKED_LOGIT, so
its probability is exactly 0 and it gets no gradient."""
from __future__ import annotations

import numpy as np
import torch

import wfrl._core as _core
from wfrl.features import MASKED_LOGIT


def head_pass(z: np.ndarray, allowed: np.ndarray | None, actions: np.ndarray,
              old_logp: np.ndarray, adv: np.ndarray, clip: float, ent_coef: float,
              grad: np.ndarray) -> tuple:
    """The compiled pass on numpy arrays: z [n, A] float32 logits, allowed [n, A] uint8 or None
    (all allowed), actions [n] int64, old_logp and adv [n] float32 (adv normalised). Writes
    d loss / d logits into grad [n, A]; returns the minibatch means (clipped surrogate, entropy,
    approximate KL, fraction of clipped ratios)."""
    if allowed is None:
        allowed = all_allowed(z.shape)
    n = z.shape[0]
    pg, ent, kl, clipped = _core.ppo_head(z, allowed, actions, old_logp, adv, clip, ent_coef, grad)
    return pg / n, ent / n, kl / n, clipped / n


class _Head(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, allowed, actions, old_logp, adv, clip, ent_coef, out):
        z = logits.detach().numpy()
        grad = np.empty(z.shape, np.float32)
        out[:] = head_pass(z, allowed, actions, old_logp, adv, clip, ent_coef, grad)
        ctx.save_for_backward(torch.from_numpy(grad))
        return logits.new_tensor(out[0] - ent_coef * out[1])

    @staticmethod
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad * g, None, None, None, None, None, None, None


def _np(t: torch.Tensor, dtype) -> np.ndarray:
    return np.ascontiguousarray(t.detach().numpy(), dtype)


_ALL_ALLOWED: dict[tuple, np.ndarray] = {}


def all_allowed(shape: tuple) -> np.ndarray:
    """A read-only all-ones mask of this shape, made once (an unmasked policy's minibatches)."""
    ones = _ALL_ALLOWED.get(shape)
    if ones is None:
        ones = np.ones(shape, np.uint8)
        ones.flags.writeable = False
        _ALL_ALLOWED.clear()
        _ALL_ALLOWED[shape] = ones
    return ones


def head_loss(logits: torch.Tensor, allowed: torch.Tensor | None, actions: torch.Tensor,
              old_logp: torch.Tensor, adv: torch.Tensor, clip: float, ent_coef: float):
    """logits [n, A] float32 (requires grad), allowed [n, A] bool/uint8 or None, actions [n]
    int64, old_logp and adv [n] float32 (adv already normalised). Compiled path."""
    stats = [0.0] * 4
    loss = _Head.apply(logits, None if allowed is None else _np(allowed, np.uint8),
                       _np(actions, np.int64), _np(old_logp, np.float32), _np(adv, np.float32),
                       float(clip), float(ent_coef), stats)
    return loss, tuple(stats)


def head_loss_reference(logits: torch.Tensor, allowed: torch.Tensor | None, actions: torch.Tensor,
                        old_logp: torch.Tensor, adv: torch.Tensor, clip: float, ent_coef: float):
    """The same loss from torch operations (autograd differentiates it)."""
    if allowed is not None:
        logits = logits + MASKED_LOGIT * (1.0 - allowed.to(torch.float32))
    log_p = torch.log_softmax(logits, dim=-1)
    logp = log_p.gather(1, actions.unsqueeze(1)).squeeze(1)
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    p = torch.softmax(logits, dim=-1)
    entropy = -(p * log_p).sum(-1).mean()
    with torch.no_grad():
        stats = (float(pg_loss), float(entropy), float(((ratio - 1) - log_ratio).mean()),
                 float(((ratio - 1).abs() > clip).to(torch.float32).mean()))
    return pg_loss - ent_coef * entropy, stats
