"""Learning with what the simulator knows while acting on what the defender sees.

Two additions to the PPO update, each reading red's true access (the truth block,
wfrl.features.truth_features) that the trajectory buffer records at every step, and neither
changing the policy that plays: a checkpoint is the same actor-critic, played the same way on
every backend.

- **PrivilegedCritic** (`--privileged-critic`): a value network of its own that reads the policy's
  input and the truth block. The update's advantages and returns are GAE over its values (the
  recorded rows, complete episodes) instead of the rollout's; it is then fitted to those returns
  over the same epochs and minibatches. The actor-critic's own critic still learns the returns
  (the planner's leaf values read it).
- **Distiller** (`--teacher CKPT`): a full-information policy (a `--truth-input` checkpoint, the
  bound) labels every state the student played with its action distribution (computed when the
  batch is built: the teacher is frozen). After each PPO update one pass over the batch lowers
  the weighted KL(teacher ‖ student) of the student's actor. The weight falls linearly to
  `teacher_floor` (0 by default) over the first `teacher_anneal` of the run, and per state it is
  exp(−α·KL(teacher ‖ auxiliary)), where an auxiliary head learns to predict the teacher from the
  student's input alone: where it cannot, the student cannot infer what the teacher knows, and
  the state counts little (ADVISOR, Weihs et al. 2021, "Bridging the imitation gap by adaptive
  insubordination").
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from torch import nn

from wfrl.envs.actions import N_ACTIONS
from wfrl.errors import UserError
from wfrl.features import MASKED_LOGIT, TRUTH_DIM
from wfrl.ppo.gae import gae
from wfrl.ppo.netspec import NetSpec, NumpyPolicy
from wfrl.ppo.policy import init_mlp, mlp

if TYPE_CHECKING:
    from wfrl.ppo.policy import ActorCritic


def _mlp(out_dim: int, hidden: int, in_dim: int, gain: float) -> nn.Sequential:
    net = mlp(out_dim, hidden, in_dim)
    init_mlp(net, gain)
    return net


def _forward(net: nn.Sequential, x: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """net(x) through the input columns `cols` only: the batch's other columns are 0 in every
    row, add exactly 0 to the first layer and get a gradient of exactly 0 (as in
    wfrl.ppo.prepare.Compact), so leaving them out changes nothing but the arithmetic done."""
    first = cast(nn.Linear, net[0])
    h = torch.tanh(x @ first.weight[:, cols].T + first.bias)
    return net[2:](h)


def _used_columns(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.flatnonzero(x.numpy().any(0)))


class _CompiledAdam:
    """A network's compiled minibatch step (wfrl._core.NetStep, the learner's) with an Adam of
    its own (betas 0.9, 0.999, eps 1e-5): the moments and step counters as numpy arrays, the
    parameters those of `params` (torch parameters or float32 arrays, stepped in place), their
    norm clipped to max_norm."""

    def __init__(self, params, max_norm: float):
        import wfrl._core as _core
        arrays = [p if isinstance(p, np.ndarray) else p.detach().numpy() for p in params]
        self.adam = {"m": [np.zeros_like(a) for a in arrays],
                     "v": [np.zeros_like(a) for a in arrays],
                     "steps": [np.zeros((), np.float32) for _ in arrays]}
        self.step = _core.NetStep(arrays, [np.zeros_like(a) for a in arrays], self.adam["m"],
                                  self.adam["v"], self.adam["steps"], 0.9, 0.999, 1e-5, max_norm)

    def state(self) -> dict:
        return {k: [torch.from_numpy(a.copy()) for a in v] for k, v in self.adam.items()}

    def load_state(self, state: dict) -> None:
        for k, arrays in self.adam.items():
            for a, t in zip(arrays, state[k]):
                a[...] = t.numpy()


def _compiled_default(compiled: bool | None) -> bool:
    """None: the compiled step where the learner would take it (WFRL_COMPILED_STEP, the CPU)."""
    if compiled is None:
        from wfrl.ppo.optim import compiled_step_mode
        return compiled_step_mode()
    return compiled


def _minibatches(n: int, k: int, gen: torch.Generator):
    perm = torch.randperm(n, generator=gen)
    mb = max(1, -(-n // k))
    for start in range(0, n, mb):
        yield perm[start:start + mb]


def rows_of(flat: np.ndarray, lengths: np.ndarray, T: int) -> np.ndarray:
    """Flat per-step values (row-major valid steps, the order of the learner's batch) back into
    [rows, T] arrays, 0 past each row's length."""
    out = np.zeros((len(lengths), T), np.float32)
    out[np.arange(T)[None, :] < lengths[:, None]] = flat
    return out


def privileged_gae(values: np.ndarray, rewards: np.ndarray, lengths: np.ndarray,
                   gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """(advantages, returns), flat, of GAE over the batch's rows with these values (each row one
    complete episode: done at its last step, nothing bootstrapped)."""
    lengths = np.asarray(lengths, np.int32)
    T = max(1, int(lengths.max(initial=0)))
    valid = np.arange(T)[None, :] < lengths[:, None]
    dones = np.zeros((len(lengths), T), np.uint8)
    dones[np.arange(len(lengths)), np.maximum(lengths - 1, 0)] = 1
    adv, ret = gae(rows_of(rewards, lengths, T), rows_of(values, lengths, T), dones, lengths,
                   np.zeros(len(lengths), np.float32), gamma, lam)
    return adv[valid], ret[valid]


class PrivilegedCritic:
    """V(policy input ⊕ truth block), its own Adam and minibatch order (see the module).

    compiled: its minibatch steps run in C (wfrl._core.NetStep.critic_step, the learner's own
    compiled critic step: forward, backward, clip and Adam in one call); else in torch, the plain
    twin (tests/test_privileged.py holds them together). Both take the learner's value loss,
    value_coef · 0.5·mean((v − return)²), Adam (0.9, 0.999, eps 1e-5) and the norm clip."""

    def __init__(self, in_dim: int, hidden: int, lr: float, seed: int,
                 max_grad_norm: float = 0.5, compiled: bool | None = None):
        self.in_dim = in_dim + TRUTH_DIM
        self.net = _mlp(1, hidden, self.in_dim, 1.0)
        self.max_grad_norm = max_grad_norm
        self.gen = torch.Generator().manual_seed(seed + 0x5EED)
        self.compiled = _compiled_default(compiled)
        self.opt = (None if self.compiled else
                    torch.optim.Adam(self.net.parameters(), lr=lr, eps=1e-5))
        self._c = _CompiledAdam(self.net.parameters(), max_grad_norm) if self.compiled else None

    def inputs(self, batch) -> torch.Tensor:
        if batch.truth is None:
            raise ValueError("a privileged critic needs the batch's truth rows (to_batch "
                             "privileged=True)")
        return torch.from_numpy(np.concatenate((batch.obs, batch.truth), axis=1))

    @torch.no_grad()
    def relabel(self, batch, gamma: float, lam: float, x: torch.Tensor | None = None):
        """The batch with its values, advantages and returns from this critic (x: its inputs,
        self.inputs(batch), where the caller has them)."""
        x = self.inputs(batch) if x is None else x
        v = self.net(x).squeeze(-1).numpy().astype(np.float32)
        adv, ret = privileged_gae(v, batch.rewards, batch.lengths, gamma, lam)
        return dataclasses.replace(batch, values=v, advantages=adv, returns=ret)

    def fit(self, batch, epochs: int, minibatches: int, lr: float, value_coef: float,
            x: torch.Tensor | None = None) -> float:
        """The value loss's descent on the batch's returns (x as in relabel); returns the mean
        loss."""
        x = self.inputs(batch) if x is None else x
        ret = torch.from_numpy(np.asarray(batch.returns, np.float32))
        cols = _used_columns(x)
        x = x[:, cols]
        if self.opt is not None:
            for g in self.opt.param_groups:
                g["lr"] = lr
        cols_np = cols.numpy().astype(np.int64)
        losses = []
        for _ in range(epochs):
            for idx in _minibatches(len(ret), minibatches, self.gen):
                if self.compiled:
                    assert self._c is not None   # (made where compiled)
                    loss, _ = self._c.step.critic_step(
                        np.ascontiguousarray(x[idx].numpy()), cols_np,
                        np.ascontiguousarray(ret[idx].numpy()), value_coef, lr)
                    losses.append(loss)
                    continue
                half_mse = 0.5 * (_forward(self.net, x[idx], cols).squeeze(-1)
                                  - ret[idx]).pow(2).mean()
                assert self.opt is not None   # (made where not compiled)
                self.opt.zero_grad(set_to_none=True)
                (value_coef * half_mse).backward()
                nn.utils.clip_grad_norm_(self.net.parameters(), self.max_grad_norm)
                self.opt.step()
                losses.append(half_mse.item())
        return float(np.mean(losses)) if losses else 0.0

    def state(self) -> dict:
        out = {"net": self.net.state_dict(), "rng": self.gen.get_state()}
        if self.opt is not None:
            out["opt"] = self.opt.state_dict()
        else:
            assert self._c is not None   # (made where opt is not)
            out["adam"] = self._c.state()
        return out

    def load_state(self, state: dict) -> None:
        """A saved critic, its minibatch order and (from the same kind of step, compiled or
        torch) its Adam moments; moments of the other kind start fresh."""
        with torch.no_grad():   # in place: the compiled step holds the parameters' memory
            for p, q in zip(self.net.parameters(), state["net"].values()):
                p.copy_(q)
        self.gen.set_state(state["rng"])
        if self.opt is not None and "opt" in state:
            self.opt.load_state_dict(state["opt"])
        elif self._c is not None and "adam" in state:
            self._c.load_state(state["adam"])


class Teacher:
    """A frozen full-information policy: its NetSpec (truth input on, no belief) and its actor's
    weights, evaluated on a whole batch at once: compiled (wfrl._core.NetStep.probs, the
    learner's forward pass) where the learner's step is, else with numpy, the plain twin
    (tests/test_privileged.py holds them together)."""

    CHUNK = 4096     # rows per compiled call (its scratch grows with them)

    def __init__(self, flat: np.ndarray, net: NetSpec, source: str = "teacher",
                 compiled: bool | None = None):
        if not net.truth_input:
            raise UserError(f"--teacher {source}: not a full-information policy (train it with "
                            "--truth-input)")
        if net.belief:
            raise UserError(f"--teacher {source}: a teacher with the belief input is not "
                            "supported")
        self.net, self.source = net, source
        self._policy = NumpyPolicy(np.array(flat, np.float32), net.hidden, net.in_dim)
        self._step = None
        if _compiled_default(compiled):   # (forward only: its Adam never steps)
            self._step = _CompiledAdam([a for layer in self._policy._a for a in layer],
                                       1.0).step

    def probs(self, x: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
        """Action probabilities float32 [N, 145] for teacher inputs x [N, in_dim]; allowed: the
        teacher's own mask (bool [N, 145]) where its network masks."""
        if self._step is not None:
            ok = None if allowed is None else np.asarray(allowed).view(np.uint8)
            cols = np.flatnonzero(np.asarray(x).any(0)).astype(np.int64)   # the columns in use
            x = np.ascontiguousarray(np.asarray(x, np.float32)[:, cols])
            out = np.empty((len(x), N_ACTIONS), np.float32)
            for a in range(0, len(x), self.CHUNK):
                rows = slice(a, a + self.CHUNK)
                out[rows] = self._step.probs(x[rows], cols,
                                             None if ok is None else np.ascontiguousarray(ok[rows]))
            return out
        z = self._policy.batch_logits(x)
        if allowed is not None:
            z = np.where(allowed, z, np.float32(MASKED_LOGIT))
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        return p.astype(np.float32)


class Distiller:
    """The student's pass toward the teacher after each update (see the module): its own Adam on
    the actor's parameters, the auxiliary head and its Adam, and the minibatch order.

    compiled: each minibatch's two steps (the auxiliary head's, then the student's with the
    weights from the head's KL before its step) run in C (wfrl._core.NetStep.kl_step); else in
    torch, the plain twin (tests/test_privileged.py holds them together). The student's gradient
    norm is clipped to max_grad_norm, the head's is not."""

    def __init__(self, model: ActorCritic, in_dim: int, hidden: int, lr: float, seed: int,
                 coef: float, anneal: float, alpha: float, floor: float = 0.0,
                 max_grad_norm: float = 0.5, compiled: bool | None = None):
        self.model, self.coef, self.anneal, self.alpha = model, coef, anneal, alpha
        self.floor, self.max_grad_norm = floor, max_grad_norm
        self.aux = _mlp(N_ACTIONS, hidden, in_dim, 0.01)
        self.gen = torch.Generator().manual_seed(seed + 0xD157)
        self.compiled = _compiled_default(compiled)
        self.opt = self.aux_opt = None
        self._student = self._aux = None
        if self.compiled:
            self._student = _CompiledAdam(model.actor.parameters(), max_grad_norm)
            self._aux = _CompiledAdam(self.aux.parameters(), float("inf"))
        else:
            self.opt = torch.optim.Adam(model.actor.parameters(), lr=lr, eps=1e-5)
            self.aux_opt = torch.optim.Adam(self.aux.parameters(), lr=lr, eps=1e-5)

    def weight(self, frac: float) -> float:
        """The KL term's weight at progress frac (share of the run's episodes done): coef falling
        linearly to floor over the first `anneal` of the run, then floor."""
        if self.anneal <= 0:
            return self.floor
        return self.floor + (self.coef - self.floor) * max(0.0, 1.0 - frac / self.anneal)

    def step(self, batch, frac: float, minibatches: int, lr: float,
             steps: int | None = None) -> dict:
        """The pass over the batch: `steps` of its `minibatches` random shares (all of them when
        None); {} once the weight has reached 0."""
        coef = self.weight(frac)
        if coef <= 0.0 or batch.teacher_probs is None:
            return {}
        x = torch.from_numpy(np.ascontiguousarray(batch.obs, np.float32))
        p_t = torch.from_numpy(batch.teacher_probs)
        allowed = None if batch.masks is None else torch.from_numpy(np.asarray(batch.masks))
        shares = list(_minibatches(len(x), minibatches, self.gen))
        if steps is not None and steps < len(shares):
            # only the rows of the shares stepped on are prepared
            rows = torch.cat(shares[:steps])
            x, p_t = x[rows], p_t[rows]
            allowed = None if allowed is None else allowed[rows]
            bounds = np.cumsum([0] + [len(s) for s in shares[:steps]])
            shares = [torch.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        if allowed is not None:   # the teacher's mass on actions the student may not take
            p_t = p_t * allowed
            p_t = p_t / p_t.sum(-1, keepdim=True).clamp_min(1e-12)
        cols = _used_columns(x)
        x = x[:, cols]
        kls, weights = (self._compiled_pass if self.compiled else self._torch_pass)(
            x, cols, p_t, allowed, shares, coef, lr)
        return {"teacher_kl": float(np.mean(kls)), "teacher_weight": float(np.mean(weights)),
                "teacher_coef": coef}

    def _torch_pass(self, x, cols, p_t, allowed, shares, coef: float, lr: float):
        """The minibatch steps in torch (the plain twin): per share, both networks' KL toward
        the teacher, the head's (detached) setting the student's per-state weights."""
        assert self.opt is not None and self.aux_opt is not None   # (made where not compiled)
        log_t = torch.log(p_t.clamp_min(1e-12))
        for opt in (self.opt, self.aux_opt):
            for g in opt.param_groups:
                g["lr"] = lr
        kls, weights = [], []
        for idx in shares:
            xi, pi, li = x[idx], p_t[idx], log_t[idx]
            mi = None if allowed is None else allowed[idx]
            kl_s = self._kl(_forward(self.model.actor, xi, cols), pi, li, mi)
            kl_aux = self._kl(_forward(self.aux, xi, cols), pi, li, mi)
            w = (torch.exp(-self.alpha * kl_aux.detach()) if self.alpha > 0
                 else torch.ones_like(kl_aux))
            loss = coef * (w * kl_s).mean()
            self.opt.zero_grad(set_to_none=True)
            self.aux_opt.zero_grad(set_to_none=True)
            (loss + kl_aux.mean()).backward()
            nn.utils.clip_grad_norm_(self.model.actor.parameters(), self.max_grad_norm)
            self.opt.step()
            self.aux_opt.step()
            kls.append(kl_s.mean().item())
            weights.append(w.mean().item())
        return kls, weights

    def _compiled_pass(self, x, cols, p_t, allowed, shares, coef: float, lr: float):
        """The torch loop's minibatch steps in C: per share, the head's KL before its step sets
        the student's per-state weights."""
        xs, ps = x.numpy(), p_t.numpy()
        ok = (np.ones(ps.shape, np.uint8) if allowed is None
              else allowed.numpy().view(np.uint8))
        cols_np = cols.numpy().astype(np.int64)
        # the actions some row allows (the rest add nothing and get no gradient: left out)
        acts: np.ndarray | None
        acts = np.flatnonzero(ok.any(0)).astype(np.int64)
        if len(acts) == ok.shape[1]:
            acts = None
        else:
            ps, ok = ps[:, acts], ok[:, acts]
        assert self._aux is not None and self._student is not None   # (made where compiled)
        kls, weights = [], []
        for idx in shares:
            rows = idx.numpy()
            xi, pi, mi = (np.ascontiguousarray(a[rows]) for a in (xs, ps, ok))
            kl_aux, _, _ = self._aux.step.kl_step(xi, cols_np, acts, mi, pi, None, 1.0, lr)
            w = (np.exp(-self.alpha * kl_aux).astype(np.float32) if self.alpha > 0
                 else np.ones_like(kl_aux))
            kl_s, _, _ = self._student.step.kl_step(xi, cols_np, acts, mi, pi, w, coef, lr)
            kls.append(float(kl_s.mean()))
            weights.append(float(w.mean()))
        return kls, weights

    @staticmethod
    def _kl(logits, p_t, log_t, allowed):
        if allowed is not None:
            logits = logits.masked_fill(~allowed, MASKED_LOGIT)
        return (p_t * (log_t - torch.log_softmax(logits, -1))).sum(-1)

    def state(self) -> dict:
        out = {"aux": self.aux.state_dict(), "rng": self.gen.get_state()}
        if self.compiled:
            assert self._student is not None and self._aux is not None   # (made where compiled)
            out.update(adam=self._student.state(), aux_adam=self._aux.state())
        else:
            assert self.opt is not None and self.aux_opt is not None   # (made where not compiled)
            out.update(opt=self.opt.state_dict(), aux_opt=self.aux_opt.state_dict())
        return out

    def load_state(self, state: dict) -> None:
        """A saved pass: the head's weights and the minibatch order, and (from the same kind of
        step, compiled or torch) the two Adams' moments; moments of the other kind start fresh."""
        with torch.no_grad():   # in place: the compiled step holds the head's memory
            for p, q in zip(self.aux.parameters(), state["aux"].values()):
                p.copy_(q)
        self.gen.set_state(state["rng"])
        if not self.compiled and "opt" in state:
            assert self.opt is not None and self.aux_opt is not None   # (made where not compiled)
            self.opt.load_state_dict(state["opt"])
            self.aux_opt.load_state_dict(state["aux_opt"])
        elif self.compiled and "adam" in state:
            assert self._student is not None and self._aux is not None   # (made where compiled)
            self._student.load_state(state["adam"])
            self._aux.load_state(state["aux_adam"])
