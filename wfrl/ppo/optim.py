"""The optimiser side of the PPO update: Adam as the learner makes it, its fused kernel called
directly (without opt.step()'s Python), the gradient-norm clip's kernels, and an Adam whose
methods do not import torch._dynamo. The calls into torch's private kernels are made only on
the torch versions they were measured on (MEASURED_TORCH); elsewhere the public path."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch


def compiled_step_mode(value: str | None = None) -> bool:
    """Whether the learner takes its compiled steps where they apply, by WFRL_COMPILED_STEP (or
    `value`; wfrl.config.run.compiled_step_setting): auto where the CPU runs their fast tiling
    (AVX-512); off never, and any compiled call asked for by name runs the portable tiling, as on
    a CPU without AVX-512; on everywhere (the portable tiling without AVX-512: slower than
    torch's steps there, for measuring)."""
    import wfrl._core as _core
    from wfrl.config.run import compiled_step_setting
    mode = compiled_step_setting(value)
    if mode == "off":
        _core.set_gemm_level(0)
        return False
    return mode == "on" or _core.cpu_tiling() == 2


# The torch versions the private paths below were measured and tested on (tests/test_learner.py
# holds each equal to torch's public path; bench/test_bench_train.py times both side by side).
# Any other torch takes the public path: torch.optim.Adam as it is, opt.step(),
# torch.nn.utils.clip_grad_norm_.
MEASURED_TORCH = ("2.13.",)


def private_paths() -> bool:
    """Whether the learner takes its private torch paths: a torch of MEASURED_TORCH, unless the
    environment sets WFRL_TORCH_PUBLIC=1 (the public path everywhere, e.g. to compare)."""
    return (torch.__version__.startswith(MEASURED_TORCH)
            and os.environ.get("WFRL_TORCH_PUBLIC", "0") != "1")


def _undecorated(name: str):
    """torch.optim.Optimizer's method `name` without torch's _disable_dynamo wrapper, or None
    where this torch does not wrap it that way."""
    method = torch.optim.Optimizer.__dict__.get(name)
    fn = getattr(method, "__wrapped__", None)
    wrapper = getattr(getattr(method, "__code__", None), "co_qualname", "")
    return fn if fn is not None and wrapper.startswith("_disable_dynamo.") else None


_EAGER = {n: _undecorated(n) for n in ("add_param_group", "state_dict", "load_state_dict",
                                       "zero_grad")}


class EagerAdam(torch.optim.Adam):
    """torch.optim.Adam whose add_param_group (which __init__ calls), state_dict, load_state_dict
    and zero_grad run torch's own functions without their _disable_dynamo wrapper. The wrapper
    imports torch._dynamo (about 800 modules; its cost: docs/learner.md) on a first call only
    to mark the method as not to be traced by torch.compile; wfrl never compiles. The same code
    runs, on this class's objects only: torch itself and every other optimiser are untouched."""

    def add_param_group(self, param_group):
        return _EAGER["add_param_group"](self, param_group)

    def state_dict(self):
        return _EAGER["state_dict"](self)

    def load_state_dict(self, state_dict):
        return _EAGER["load_state_dict"](self, state_dict)

    def zero_grad(self, set_to_none: bool = True):
        return _EAGER["zero_grad"](self, set_to_none)


def adam(params, lr: float, fused: bool, private: bool):
    """Adam (eps 1e-5); fused where this torch has a fused CPU kernel (2.4 and later); an
    EagerAdam on the private path (private_paths(), the learner's) where this torch wraps the
    four methods as measured."""
    params = list(params)
    cls = EagerAdam if private and all(_EAGER.values()) else torch.optim.Adam
    if fused:
        try:
            return cls(params, lr=lr, eps=1e-5, fused=True)
        except (RuntimeError, TypeError, ValueError):
            pass
    return cls(params, lr=lr, eps=1e-5)


def clip_grad_norm(params: list, max_norm: float, private: bool) -> None:
    """torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True) on one group of float32
    CPU parameters; on the private path without its ~40 µs of Python around four kernels
    (grouping by device and dtype, checks): the same operations on the same values, so the same
    bits (tests/test_learner.py)."""
    if not private:
        torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
        return
    grads = [p.grad for p in params]
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))


class FusedAdamSteps:
    """The learner's Adam steps (a mixin of PPOLearner: it reads self.opt)."""

    if TYPE_CHECKING:   # what it reads of PPOLearner
        opt: torch.optim.Adam
        private: bool

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
        without the torch._dynamo import its decorator makes on first use."""
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
        """Whether _adam_params may step the optimiser: the private path (private_paths()) and a
        plain fused Adam whose state exists."""
        return self.private and self._adam_plain() and all(self.opt.state.get(p)
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
