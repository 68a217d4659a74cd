"""One PPO update on a flat batch (clipped surrogate, value loss, entropy bonus, minibatch epochs,
per-minibatch advantage normalisation, gradient-norm clipping), as PPOLearner.update runs it.

Read top to bottom, this module is the default path: update → _update, which prepares the
batch (wfrl.ppo.prepare: the tensors, the columns and actions in use, the permutations) and runs
the epochs — on two threads, the actor's steps here and the critic's on a second thread, where
each network is clipped alone (_split_epochs), else in one loop — each minibatch step through
one small interface, _actor_step(rows, ...) and _critic_step(rows, ...). Behind it:

- compiled steps (the default): where each network is clipped alone, there is no KL stop and the
  CPU has AVX-512 (_compiled_ok), each network's whole minibatch step — forward, policy head or
  value loss, backward, clip, Adam — is one GIL-free call into C (csrc/wfrl_update.h,
  _core.NetStep), as is the decoupled objective's proximal pass;
- torch steps (wfrl.ppo.torch_steps, compiled=False or where the compiled steps do not apply):
  the backward pass written out by hand in torch; equal to the compiled steps up to float
  rounding;
- the autograd step (manual=False, wfrl.ppo.torch_steps): what the hand-written backward
  replaced, bit for bit the torch steps at full width;
- the original update (reference=True, wfrl.ppo.reference), ordinary PPO only.

tests/test_learner.py holds each equal to the next. Every path draws the same permutations from
the learner's generator, so they visit the same minibatches. Adam's steps: wfrl.ppo.optim."""
from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import torch

import wfrl._core as _core
from wfrl.config.run import PPOConfig
from wfrl.envs.actions import N_ACTIONS
from wfrl.ppo.batch import Batch
from wfrl.ppo.head import all_allowed
from wfrl.ppo.optim import FusedAdamSteps, adam, clip_grad_norm, compiled_step_mode, private_paths
from wfrl.ppo.policy import ActorCritic
from wfrl.ppo.prepare import Compact, Prepared, batch_tensors, minibatch_advantages
from wfrl.ppo.reference import ReferenceUpdate
from wfrl.ppo.torch_steps import Scratch, TorchSteps, attach_grads

# Whether the learner takes its compiled steps (where they apply); tests may set it.
COMPILED_FAST = compiled_step_mode()


def takes_compiled_steps(cfg: PPOConfig, compiled: bool = True) -> bool:
    """Whether a learner of these settings steps in C on this machine: COMPILED_FAST, each
    network clipped alone (the C step clips the network it steps) and no KL stop (it does not
    stop between its forward and backward passes)."""
    return bool(compiled and COMPILED_FAST and cfg.clip_per_net and cfg.target_kl == 0)


def update_step_name(cfg: PPOConfig) -> str:
    """How this machine computes a run's updates, for its record (the paths agree up to float
    rounding, so a run repeats bit for bit only on the same one): "compiled, avx512 tiling",
    "compiled, portable tiling" or "torch"."""
    if not takes_compiled_steps(cfg):
        return "torch"
    return f"compiled, {'avx512' if _core.gemm_level() == 2 else 'portable'} tiling"

STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")


def batch_stats(batch, lr: float) -> dict:
    """What an update reports beside its minibatch means: the learning rate it stepped with and
    the explained variance of the batch's returns by the values it was collected with,
    1 − Var(returns − values) / Var(returns) (NaN for returns without variance)."""
    ret = np.asarray(batch.returns, np.float64)
    var = float(ret.var()) if ret.size else 0.0
    ev = (1.0 - float(np.var(ret - np.asarray(batch.values, np.float64))) / var
          if var > 0 else float("nan"))
    return {"learning_rate": lr, "explained_variance": ev}

_CRITIC_THREAD = None


def _critic_thread():
    """The one thread the critic's steps of a split update run on (started on first use)."""
    global _CRITIC_THREAD
    if _CRITIC_THREAD is None:
        from concurrent.futures import ThreadPoolExecutor
        _CRITIC_THREAD = ThreadPoolExecutor(1, thread_name_prefix="wfrl-critic")
    return _CRITIC_THREAD


def _forget_critic_thread() -> None:
    # a forked child has no copy of the parent's thread: its first split update starts its own
    # (with the parent's executor it waited forever on a job no thread would run)
    global _CRITIC_THREAD
    _CRITIC_THREAD = None


os.register_at_fork(after_in_child=_forget_critic_thread)


class PPOLearner(TorchSteps, FusedAdamSteps, ReferenceUpdate):
    """reference=True: the original update path (update_reference, unfused Adam) for `update`.
    manual=False: the autograd path the hand-written backward replaced (kept for comparison and
    held equal to it by tests/test_learner.py). compiled=False: the torch steps everywhere.
    net: the network's NetSpec, where it is not cfg.net() (a red attacker's)."""

    def __init__(self, cfg: PPOConfig, seed: int = 0, reference: bool = False,
                 manual: bool = True, compact: bool = True, split: bool = True,
                 compiled: bool = True, net=None):
        self.cfg = cfg
        self.reference = reference
        self.manual = manual and not reference
        self.compact = compact and self.manual
        self.split = split and self.manual   # _split_ok
        self.compiled = compiled and self.manual   # _compiled_ok
        self._net_steps: tuple | None = None   # (key, actor NetStep, critic NetStep)
        self._plan: Compact | None = None    # this update's (_update)
        self._steps: tuple | None = None      # this update's compiled steps (_compiled_steps)
        self._scratch: Scratch | None = None
        torch.manual_seed(seed)
        self._gen = torch.Generator().manual_seed(seed)
        self.net = cfg.net() if net is None else net   # (net: an attacker's, wfrl.training.attack)
        self.model = ActorCritic(cfg.hidden, self.net.in_dim)
        self.private = private_paths()   # torch's private kernels (wfrl.ppo.optim)
        self.opt = adam(self.model.parameters(), cfg.lr, fused=not reference,
                         private=self.private)
        self.version = 0
        self.entropy_coef = cfg.entropy_coef
        self.kl_stops = 0   # updates this learner ended early by the KL stop
        self.progress = 0.0   # share of the run done (set_progress): the teacher's schedule
        # the privileged parts (wfrl.ppo.privileged), made after the model: its initialisation
        # draws from torch's generator first, so a run without them starts exactly as before
        self.privileged = self.distiller = None
        if cfg.privileged_critic:
            from wfrl.ppo.privileged import PrivilegedCritic
            self.privileged = PrivilegedCritic(self.net.in_dim, cfg.hidden, cfg.lr, seed,
                                               cfg.max_grad_norm, compiled=self.compiled
                                               and COMPILED_FAST)
        if cfg.teacher is not None:
            from wfrl.ppo.privileged import Distiller
            self.distiller = Distiller(self.model, self.net.in_dim, cfg.hidden, cfg.lr, seed,
                                       cfg.teacher_coef, cfg.teacher_anneal, cfg.teacher_alpha,
                                       cfg.teacher_floor, cfg.max_grad_norm,
                                       compiled=self.compiled and COMPILED_FAST)

    def set_progress(self, frac: float) -> None:
        """Move the learning rate and entropy weight along their schedules: frac is the share of
        the run's episodes already trained on (0 at the start, 1 at the end)."""
        frac = min(max(float(frac), 0.0), 1.0)
        self.progress = frac
        cfg = self.cfg
        for g in self.opt.param_groups:
            g["lr"] = cfg.lr * (1.0 + (cfg.lr_final - 1.0) * frac)
        self.entropy_coef = cfg.entropy_coef * (1.0 + (cfg.entropy_final - 1.0) * frac)

    def flat_weights(self) -> np.ndarray:
        return self.model.flat_weights()

    # -- the update, top to bottom --------------------------------------------------------

    def update(self, batch: Batch, between=None, stale: bool = False,
               prepared: Prepared | None = None) -> dict:
        """One PPO update on `batch`; returns the mean of each statistic over its minibatches.
        between(), if given, runs before every minibatch step (the overlapped trainer gives the
        learner back its threads there once the batch collected meanwhile is in).
        stale: the batch was played by weights older than the learner's (overlap); with
        cfg.decoupled the update then uses the decoupled objective (see proximal_weights). The
        reference path (reference=True) is ordinary PPO only and refuses a stale batch then.
        prepared: this batch's Prepared (made ahead by preparer()), used where it fits."""
        lr = float(self.opt.param_groups[0]["lr"])
        if self.reference:
            if stale and self.cfg.decoupled:
                raise ValueError("the reference update has no decoupled objective for a stale batch")
            return {**self.update_reference(batch), **batch_stats(batch, lr)}
        # Python's cycle collector would otherwise run every few hundred tensor allocations and
        # walk every object torch created at import (5-10 % of an update); what an update leaves
        # behind holds no cycles, reference counting frees it.
        enabled = gc.isenabled()
        gc.disable()
        try:
            extra: dict = {}
            cfg = self.cfg
            fit_privileged = None
            if self.privileged is not None:
                # advantages and returns from the privileged critic: of what was prepared ahead
                # from the rollout's values, the targets are gathered again
                x_priv = self.privileged.inputs(batch)
                batch = self.privileged.relabel(batch, cfg.gamma, cfg.gae_lambda, x_priv)
                if prepared is not None and prepared.fits(self, len(batch)):
                    prepared = prepared.with_targets(batch.advantages, batch.returns)

                def fit_privileged():
                    # its own network, Adam and minibatch order: the same numbers whether it
                    # runs after the update's steps or beside the actor's on the critic's thread
                    assert self.privileged is not None   # (set once, in __init__)
                    extra["privileged_value_loss"] = self.privileged.fit(
                        batch, cfg.privileged_epochs, cfg.minibatches, lr, cfg.value_coef,
                        x_priv)
            out = {**self._update(batch, between, stale, prepared, fit_privileged),
                   **batch_stats(batch, lr)}
            if self.distiller is not None:
                extra.update(self.distiller.step(batch, self.progress, cfg.minibatches, lr,
                                                 cfg.teacher_steps))
            return {**out, **extra}
        finally:
            self._steps = None     # (they hold this update's tensors; made again by the next)
            if enabled:
                gc.enable()

    def _update(self, batch: Batch, between, stale: bool, prepared, critic_after=None) -> dict:
        """The update's minibatch steps. critic_after (if given) runs once, after the critic's
        steps: on the critic's thread in a split update, else at the end."""
        cfg = self.cfg
        n = len(batch)
        split = n and self._split_ok(between)
        if not (split and prepared is not None and prepared.fits(self, n)):
            prepared = None    # (the one-thread loop draws its permutations epoch by epoch)
        obs, actions, old_logp, adv_all, ret_all, masks = (
            batch_tensors(batch) if prepared is None else prepared.tensors)
        mb = max(1, -(-n // cfg.minibatches))
        groups = self.clip_groups()
        step = self._manual_step if self.manual else self._autograd_step
        self._plan = plan = None
        if self.compact and n:
            self._plan = plan = (
                prepared.plan if prepared is not None else
                Compact.of(obs.numpy(), None if masks is None else masks.numpy(),
                            actions.numpy(), cfg.hidden))
            if plan is not None:
                obs, masks, actions = plan.obs, plan.masks, plan.actions
                # what the plan leaves out stays 0 (a missing .grad: Scratch.attach_grads)
                self.model.zero_grad(set_to_none=False)
        weight_all = None
        decoupled = stale and cfg.decoupled and n
        self._steps = self._compiled_steps() if n else None
        if split:
            sources = (obs, actions, old_logp, adv_all, ret_all, masks, None)
            return self._finish(self._split_epochs(sources, n, mb, decoupled, prepared,
                                                   critic_after))
        if decoupled:
            old_logp, weight_all = self.proximal_weights(obs, actions, old_logp, masks, plan)
        sources = (obs, actions, old_logp, adv_all, ret_all, masks, weight_all)
        gathered = [None if t is None else np.empty(t.shape, t.numpy().dtype) for t in sources]
        stats = []
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self._gen).numpy()
            # numpy's row gather into buffers kept for the update: a third of the time of
            # torch's index_select here, the same values
            # (Any: only masks and weights may be None)
            o, a, lp0, ad, rt, mk, wt = cast(Iterator[Any], (
                None if t is None else torch.from_numpy(np.take(t.numpy(), perm, 0, out=g))
                for t, g in zip(sources, gathered)))
            for start in range(0, n, mb):
                if between is not None:
                    between()
                sl = slice(start, start + mb)
                got = step(o[sl], None if mk is None else mk[sl], a[sl], lp0[sl],
                           minibatch_advantages(ad, wt, sl), rt[sl], groups)
                if got is None:          # the KL stop
                    break
                stats.append(got)
            else:
                continue
            break   # the KL stop ends the whole update, not only this epoch
        if critic_after is not None:
            critic_after()
        return self._finish(stats)

    def _split_epochs(self, sources, n: int, mb: int, decoupled: bool | int, prepared=None,
                      critic_after=None) -> list:
        """Every epoch of the update with the actor's steps on this thread and the critic's on a
        second one. Under clip_per_net the two networks share nothing within an update but the
        minibatches: the actor's loss (surrogate and entropy) does not involve the critic's
        weights, the value loss not the actor's, each gradient is clipped by its own norm and
        Adam is elementwise. So each thread makes exactly the operations the one-thread path
        makes for its network, in the same order: the same bits (tests/test_learner.py). torch's
        operations release the GIL, so the two chains of matrix products run at once when a
        second core is free, and interleave on one core when not (no spinning threads: each
        operation runs single-threaded in the thread that issues it). decoupled: the actor's
        thread computes the proximal pass first (proximal_weights; the critic does not need it).
        prepared (a Prepared that fits): the permutations and the gathered epochs come from it,
        and the generator moves to where drawing them would leave it; only the behaviour or
        proximal log-probabilities and weights are gathered here. critic_after: run on the
        critic's thread once its steps are done (the privileged critic's fit, which shares
        nothing with the actor's steps)."""
        cfg = self.cfg
        obs, actions, old_logp, adv_all, ret_all, masks, weight_all = sources
        if prepared is None:
            # the permutations the one-thread path draws epoch by epoch (without the KL stop it
            # always draws all of them, so the generator ends where it would)
            perms = [torch.randperm(n, generator=self._gen).numpy() for _ in range(cfg.epochs)]
        else:
            perms = prepared.perms
            self._gen.set_state(prepared.state_out)
        if self._steps is None:    # (the torch steps' buffers; the compiled ones keep their own)
            self._ensure_scratch(min(mb, n))
        actor_params, critic_params = self.clip_groups()

        def gather(tensors):
            bufs = [None if t is None else np.empty(t.shape, t.numpy().dtype) for t in tensors]
            for perm in perms:
                yield [None if t is None else torch.from_numpy(np.take(t.numpy(), perm, 0, out=b))
                       for t, b in zip(tensors, bufs)]

        def critic_rows():
            if prepared is None:
                yield from gather((obs, ret_all))
            else:
                for o, _, _, rt, _ in prepared.epoch_rows:
                    yield o, rt

        def actor_rows(old_logp, weight_all):
            """Each epoch's (rows, actions, log-probabilities, masks, advantages of a slice)."""
            if prepared is None:
                for o, a, lp0, ad, mk, wt in gather((obs, actions, old_logp, adv_all, masks,
                                                     weight_all)):
                    yield o, a, lp0, mk, (lambda sl, ad=ad, wt=wt:
                                          minibatch_advantages(ad, wt, sl))
                return
            for (o, a, adn, _, mk), (lp0, wt) in zip(prepared.epoch_rows,
                                                     gather((old_logp, weight_all))):
                yield o, a, lp0, mk, (lambda sl, adn=adn, wt=wt:
                                      adn[sl] if wt is None else adn[sl] * wt[sl])

        def critic() -> list:
            out = []
            with torch.no_grad():
                for o, rt in critic_rows():
                    for start in range(0, n, mb):
                        sl = slice(start, start + mb)
                        out.append(self._critic_step(o[sl], rt[sl], critic_params))
            if critic_after is not None:
                critic_after()
            return out

        job = _critic_thread().submit(critic)
        actor_stats = []
        error: BaseException | None
        try:
            with torch.no_grad():
                if decoupled:
                    old_logp, weight_all = self.proximal_weights(obs, actions, old_logp, masks,
                                                                 self._plan)
                for o, a, lp0, mk, advantages in actor_rows(old_logp, weight_all):
                    for start in range(0, n, mb):
                        sl = slice(start, start + mb)
                        actor_stats.append(self._actor_step(
                            o[sl], None if mk is None else mk[sl], a[sl], lp0[sl],
                            advantages(sl), actor_params))
        except BaseException as exc:
            error = exc
        else:
            error = None
        # The critic's thread ends before anything leaves the update — an error of the actor's
        # steps, or an interrupt that arrives while waiting for it (raised once it is done).
        interrupt = None
        while True:
            try:
                job.exception()          # waits; the critic's own error comes with result()
                break
            except BaseException as exc:
                interrupt = interrupt or exc
        if error is not None:
            raise error
        if interrupt is not None:
            raise interrupt
        critic_losses = job.result()
        return [(pg, v, ent, kl, clipped)
                for (pg, ent, kl, clipped), v in zip(actor_stats, critic_losses)]

    def _finish(self, stats: list) -> dict:
        """The end of an update: the version moves on; the mean of each statistic over its
        minibatch steps."""
        self.version += 1
        if not stats:
            return dict.fromkeys(STAT_NAMES, 0.0)
        return dict(zip(STAT_NAMES, np.mean(np.asarray(stats, np.float64), axis=0).tolist()))

    # -- one minibatch step: compiled where it applies, else the torch steps ----------------

    @torch.no_grad()
    def _manual_step(self, x, mk, a, lp0, adv, ret, groups):
        """The same minibatch step with the backward pass written out: every matrix product
        into a buffer kept between steps, the gradients straight into each parameter's .grad,
        no autograd graph (see Scratch); or, where _compiled_ok, each network's whole step in
        C (_actor_step, _critic_step). Returns the statistics, or None on the KL stop."""
        if self._steps is not None:
            actor_params, critic_params = groups
            pg, ent, kl, clipped = self._actor_step(x, mk, a, lp0, adv, actor_params)
            v_loss = self._critic_step(x, ret, critic_params)
            return pg, v_loss, ent, kl, clipped   # STAT_NAMES order
        self._ensure_scratch(x.shape[0])
        got = self._actor_grads(x, mk, a, lp0, adv)
        if got is None:
            return None
        v_loss = self._critic_grads(x, ret)
        for group in groups:
            clip_grad_norm(group, self.cfg.max_grad_norm, self.private)
        self._adam_step()
        pg, ent, kl, clipped = got
        return pg, v_loss, ent, kl, clipped   # STAT_NAMES order

    def _actor_step(self, x, mk, a, lp0, adv, params) -> tuple:
        """The actor's whole minibatch step (under no_grad): its gradients, their clip and its
        Adam step; returns (surrogate, entropy, approximate KL, clipped share). Compiled where
        this update's steps are (_compiled_steps), else the torch path."""
        if self._steps is None:
            return self._torch_actor_step(x, mk, a, lp0, adv, params)
        pg, ent, kl, clipped, _ = self._steps[0].actor_step(
            *self._compiled_rows(x, mk, self._plan), a.numpy(), lp0.numpy(),
            np.ascontiguousarray(adv.numpy()), float(self.cfg.clip), float(self.entropy_coef),
            float(self.opt.param_groups[0]["lr"]))
        return pg, ent, kl, clipped

    def _critic_step(self, x, ret, params) -> float:
        """The critic's whole minibatch step (under no_grad), as _actor_step; returns the value
        loss."""
        if self._steps is None:
            return self._torch_critic_step(x, ret, params)
        plan = self._plan
        v_loss, _ = self._steps[1].critic_step(
            x.numpy(), None if plan is None else plan.cols.numpy(), ret.numpy(),
            float(self.cfg.value_coef), float(self.opt.param_groups[0]["lr"]))
        return v_loss

    @staticmethod
    def _compiled_rows(x, masks, plan) -> tuple:
        """What a compiled actor call takes for rows x: (x, the input columns in use, the
        actions in use — None for every one without a plan —, the allowed-action mask, all
        ones for an unmasked policy), as numpy arrays."""
        allowed = (masks.numpy() if masks is not None else all_allowed(
            (x.shape[0], N_ACTIONS if plan is None else plan.n_actions)))
        return (x.numpy(), None if plan is None else plan.cols.numpy(),
                None if plan is None else plan.acts.numpy(), allowed)

    def _compiled_ok(self) -> bool:
        """Whether this update's minibatch steps may run compiled (csrc/wfrl_update.h, one call
        per network and minibatch): the hand-written path with compiled=True, each network
        clipped alone (the C step clips the network it steps), no KL stop (the C step does not
        stop between its forward and backward passes), a plain fused Adam (whose kernel it
        replaces) and a CPU with AVX-512 (COMPILED_FAST, WFRL_COMPILED_STEP; elsewhere the C
        products are slower than torch's)."""
        return takes_compiled_steps(self.cfg, self.compiled) and self._adam_plain()

    def _compiled_steps(self) -> tuple | None:
        """(actor, critic) NetStep over the parameters, gradients and Adam state this update
        steps, or None where _compiled_ok does not hold. Made again when any of those tensors
        is a new one (a loaded state, a gradient set to None and remade)."""
        if not self._compiled_ok():
            return None
        self._adam_first_state()
        attach_grads(self.model.parameters())     # (the C step writes every .grad)
        groups = self.clip_groups()
        state = self.opt.state
        key = tuple(t.data_ptr() for group in groups for p in group
                    for t in (p, p.grad, state[p]["exp_avg"], state[p]["exp_avg_sq"],
                              state[p]["step"]))
        if self._net_steps is None or self._net_steps[0] != key:
            g = self.opt.param_groups[0]
            beta1, beta2 = g["betas"]

            def net(params):
                st = [state[p] for p in params]
                return _core.NetStep([p.detach().numpy() for p in params],
                                     [p.grad.numpy() for p in params],
                                     [x["exp_avg"].numpy() for x in st],
                                     [x["exp_avg_sq"].numpy() for x in st],
                                     [x["step"].numpy() for x in st],
                                     beta1, beta2, g["eps"], self.cfg.max_grad_norm)
            self._net_steps = (key, net(groups[0]), net(groups[1]))
        return self._net_steps[1:]

    # Largest importance weight of a stale step (a guard: one update apart, weights stay near 1).
    MAX_PROXIMAL_WEIGHT = 10.0

    @torch.no_grad()
    def proximal_weights(self, obs, actions, behaviour_logp, masks, plan=None):
        """Decoupled PPO (Hilton et al. 2021, "Batch size-invariance for policy optimization")
        for a batch played by stale weights: the ratio is clipped against the proximal policy —
        the learner's policy before this update — instead of the behaviour policy, and each step
        is weighted by π_prox(a|s) / π_behav(a|s) (at most MAX_PROXIMAL_WEIGHT). With fresh
        weights the two policies are the same and this is ordinary PPO. Returns (proximal
        log-probabilities, weights). With a Compact plan, obs, actions and masks are the plan's
        and only the actor's used columns and actions are multiplied (the value is not needed).
        Where this update's steps are compiled, the pass is too (NetStep.actor_logp)."""
        if self._steps is not None:
            prox, weight = self._steps[0].actor_logp(
                *self._compiled_rows(obs, masks, plan), actions.numpy(),
                np.ascontiguousarray(behaviour_logp.numpy(), np.float32),
                self.MAX_PROXIMAL_WEIGHT)
            return torch.from_numpy(prox), torch.from_numpy(weight)
        if plan is None:
            logits = self.model.actor(obs)     # (the critic may be stepping on another thread)
        else:
            (w1, b1), (w2, b2), (w3, b3) = (
                (m.weight, m.bias) for m in self.model.actor if isinstance(m, torch.nn.Linear))
            h = torch.addmm(b1, obs, torch.index_select(w1, 1, plan.cols).t()).tanh_()
            h = torch.addmm(b2, h, w2.t()).tanh_()
            logits = torch.addmm(torch.index_select(b3, 0, plan.acts), h,
                                 torch.index_select(w3, 0, plan.acts).t())
        if masks is not None:
            # -inf, not MASKED_LOGIT: the same probabilities (exactly 0), without exp's slow path
            # for results that underflow
            logits = logits.masked_fill(masks == 0, float("-inf"))
        prox = torch.log_softmax(logits, dim=-1).gather(1, actions.unsqueeze(1)).squeeze(1)
        weight = (prox - behaviour_logp).exp().clamp(max=self.MAX_PROXIMAL_WEIGHT)
        return prox.contiguous(), weight.contiguous()

    # -- when the split and the preparation apply ------------------------------------------

    def _split_ok(self, between) -> bool:
        """Whether this update may run the actor's and the critic's steps on two threads
        (_split_epochs): they are independent exactly when each network's gradient norm is
        clipped alone and nothing couples their steps — no KL stop (decided by the actor, it
        would stop the critic's step too), no per-step callback, and Adam's state exists (made
        by the first step, which runs on one thread). And torch runs each operation on one thread
        (--learner-threads 1, the default): two threads issuing multi-threaded operations would
        share one OpenMP pool."""
        return (self._split_possible() and between is None and torch.get_num_threads() == 1
                and self._adam_direct())

    def _split_possible(self) -> bool:
        """The part of _split_ok that the learner's settings decide once: the split is enabled,
        the backward is the hand-written one, each network is clipped alone, no KL stop, and
        torch's private path (wfrl.ppo.optim.private_paths: the split steps Adam per network)."""
        cfg = self.cfg
        return (self.split and self.private and self.manual and cfg.clip_per_net
                and cfg.target_kl == 0)

    def preparer(self, before: int):
        """A function of a batch that returns its Prepared for this learner's next update but
        one — the update on a batch of `before` rows comes first (0: none) — or None where no
        update would use it; safe to call on another thread while this learner updates (it
        reads a copy of the generator's state taken now)."""
        if not self._split_possible():
            return lambda batch: None     # (no split update would use it)
        cfg, compact, state = self.cfg, self.compact, self._gen.get_state()
        return lambda batch: Prepared(cfg, compact, batch, state, before)

    # -- shared by every path ----------------------------------------------------------------

    def clip_groups(self) -> list:
        """The parameter groups whose gradient norms are clipped: all together, or (clip_per_net)
        the actor's and the critic's apart."""
        if self.cfg.clip_per_net:
            return [list(self.model.actor.parameters()), list(self.model.critic.parameters())]
        return [list(self.model.parameters())]

    def kl_exceeded(self, approx_kl: float) -> bool:
        """The KL early stop (cfg.target_kl > 0): the minibatch's policy, before its step, has
        moved further than 1.5 × target_kl from the one that played the batch."""
        stop = self.cfg.target_kl > 0 and approx_kl > 1.5 * self.cfg.target_kl
        self.kl_stops += stop
        return stop

    def state(self) -> dict:
        """Everything needed to continue training; loadable with torch.load(weights_only=True)."""
        out = {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
               "version": self.version, "rng": self._gen.get_state()}
        if self.privileged is not None:
            out["privileged_critic"] = self.privileged.state()
        if self.distiller is not None:
            out["distiller"] = self.distiller.state()
        return out

    def load_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if "optimizer" in state:
            self.opt.load_state_dict(state["optimizer"])
        self.version = int(state.get("version", 0))
        if "rng" in state:  # the minibatch shuffles continue exactly where they stopped
            self._gen.set_state(state["rng"])
        # a run's privileged parts continue where they stopped (a policy started from a
        # checkpoint without them starts them fresh)
        if self.privileged is not None and "privileged_critic" in state:
            self.privileged.load_state(state["privileged_critic"])
        if self.distiller is not None and "distiller" in state:
            self.distiller.load_state(state["distiller"])
