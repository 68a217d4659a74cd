"""The optimiser side of the PPO update: Adam as the learner makes it, its fused kernel called
directly (without opt.step()'s Python), the gradient-norm clip's kernels, and torch's optimiser
methods kept from importing torch._dynamo."""
from __future__ import annotations

import torch


def _eager_optimizer_methods() -> None:
    """torch.optim.Optimizer's state_dict, load_state_dict, zero_grad and add_param_group (which
    its __init__ calls) are wrapped by torch._compile._disable_dynamo, which imports torch._dynamo
    (about 800 modules: 1.9 s on the 2-core machine, before a run's first update) on its first
    call, only to mark the method as not to be traced by torch.compile. wfrl never compiles, so
    each method is given its own undecorated function as that mark (the wrapper's cache
    attribute, `__dynamo_disable`): the same function runs, without the import. A torch whose
    wrapper looks otherwise is left as it is (the import then happens as before)."""
    for name in ("state_dict", "load_state_dict", "zero_grad", "add_param_group"):
        method = torch.optim.Optimizer.__dict__.get(name)
        fn = getattr(method, "__wrapped__", None)
        wrapper = getattr(getattr(method, "__code__", None), "co_qualname", "")
        if fn is not None and wrapper.startswith("_disable_dynamo.") \
                and getattr(fn, "__dynamo_disable", None) is None:
            fn.__dynamo_disable = fn


_eager_optimizer_methods()


def _adam(params, lr: float, fused: bool):
    """Adam (eps 1e-5); fused where this torch has a fused CPU kernel (2.4 and later)."""
    params = list(params)
    if fused:
        try:
            return torch.optim.Adam(params, lr=lr, eps=1e-5, fused=True)
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.Adam(params, lr=lr, eps=1e-5)


def _clip_grad_norm(grads: list, max_norm: float) -> None:
    """torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True) on one group of float32
    CPU gradients, without its ~40 µs of Python around four kernels (grouping by device and dtype,
    checks): the same operations on the same values, so the same bits
    (tests/test_learner.py)."""
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))


class FusedAdamSteps:
    """The learner's Adam steps (a mixin of PPOLearner: it reads self.opt)."""

    def _adam_step(self) -> None:
        """opt.step() for the fused Adam, without the ~0.3 ms of Python around its kernel per call
        (a tenth of a minibatch step): the step counters and torch's fused kernel, on the
        optimiser's own state tensors, as torch.optim.Adam calls them — the same numbers, and
        the state it saves; the first step too, on the state _adam_first_state creates. Falls
        back to opt.step() for anything but a plain fused Adam."""
        self._adam_first_state()
        if not self._adam_direct():
            self.opt.step()
            return
        self._adam_params(self.opt.param_groups[0]["params"])

    def _adam_first_state(self) -> None:
        """Before the first step of a plain fused Adam: its state as torch.optim.Adam creates it
        (a float32 step of 0 and zero moments per parameter), so that the first step too is the
        kernel call of _adam_params — the same numbers as opt.step() (tests/test_learner.py),
        without the torch._dynamo import its decorator makes on first use (1.9 s)."""
        opt = self.opt
        params = opt.param_groups[0]["params"]
        if not self._adam_plain() or any(opt.state.get(p) for p in params):
            return
        for p in params:
            opt.state[p] = {"step": torch.zeros((), dtype=torch.float32),
                            "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                            "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}

    def _adam_plain(self) -> bool:
        """Whether the optimiser is a plain fused Adam: one group, none of amsgrad, weight
        decay, maximize, capturable or differentiable — what _adam_params calls torch's kernel
        for."""
        opt = self.opt
        group = opt.param_groups[0]
        return not (len(opt.param_groups) != 1 or not group.get("fused") or group["amsgrad"]
                    or group["weight_decay"] or group.get("decoupled_weight_decay")
                    or group["maximize"] or group.get("capturable") or group.get("differentiable"))

    def _adam_direct(self) -> bool:
        """Whether _adam_params may step the optimiser (a plain fused Adam whose state exists)."""
        return self._adam_plain() and all(self.opt.state.get(p)
                                          for p in self.opt.param_groups[0]["params"])

    def _adam_params(self, params) -> None:
        """torch's fused Adam kernel on `params` (some or all of the optimiser's): elementwise,
        so stepping the actor's and the critic's parameters apart gives the bits of one step."""
        group = self.opt.param_groups[0]
        states = [self.opt.state[p] for p in params]
        steps = [st["step"] for st in states]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(list(params), [p.grad for p in params],
                           [st["exp_avg"] for st in states],
                           [st["exp_avg_sq"] for st in states], [], steps, amsgrad=False,
                           lr=group["lr"], beta1=group["betas"][0], beta2=group["betas"][1],
                           weight_decay=0.0, eps=group["eps"], maximize=False, grad_scale=None,
                           found_inf=None)
