"""One PPO update on a flat batch (clipped surrogate, value loss, entropy bonus, minibatch epochs,
per-minibatch advantage normalisation, global gradient-norm clipping).

Four implementations of the same update, all held equal by tests/test_learner.py:

- `update` (the default) with compiled steps: where each network is clipped alone, there is no
  KL stop and the CPU has AVX-512 (_compiled_ok), each network's whole minibatch step — forward,
  policy head or value loss, backward, clip, Adam — is one GIL-free call into C
  (csrc/wfrl_update.h, _core.NetStep), as is the decoupled objective's proximal pass; equal to
  the torch steps below up to float rounding;
- `update` with compiled=False (or where the compiled steps do not apply): the backward pass
  written out by hand in torch. Per minibatch step the six
  matrix products of the forward pass and the ten of the backward go into buffers kept between
  steps (torch.addmm/mm with out=), tanh' = 1 − h² is applied in place, and each gradient lands
  directly in its parameter's .grad, where the gradient clip and fused Adam read it as usual:
  no autograd graph is built, recorded or walked. By default the products cover only the input
  columns and actions the batch uses (_Compact: the others contribute exact zeros), equal to
  the full-width products up to float rounding; with compact=False it gives the autograd path's
  numbers bit for bit (the same products in the same order);
- `manual=False`: the autograd path it replaced — the model's forward, the compiled policy head
  (wfrl.ppo.head, C in csrc/wfrl_head.h) as an autograd Function, `loss.backward()`;
- `reference=True` (`update_reference`): the original code path, kept for comparison: masked_fill
  and exp of a −1e9 log-probability (float underflow takes exp's slow path; half its time), the
  log-softmax, surrogate and entropy as a dozen torch operations, fancy indexing per minibatch,
  unfused Adam. Equal to the others up to float32 rounding.

The first three gather each epoch's shuffled batch once (numpy's take) and slice minibatches from
it. All four draw the same permutations from the learner's generator, so they visit the same
minibatches."""
from __future__ import annotations

import gc

import numpy as np
import torch

from wfrl.config import PPOConfig  # noqa: F401  (declared in config.py with every setting)
from wfrl.envs.base import N_ACTIONS
from wfrl.features import MASKED_LOGIT
from wfrl.ppo.batch import Batch
from wfrl import _core
from wfrl.ppo.head import _all_allowed, head_loss, head_pass
from wfrl.ppo.policy import ActorCritic


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


# Whether this CPU runs the compiled step's fast products (AVX-512); tests may set it.
COMPILED_FAST = _core.compiled_step_fast()

STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")


class _Scratch:
    """What the hand-written backward keeps between minibatch steps: each layer's (weight, bias),
    every activation and every gradient with respect to one, for up to `rows` rows (a shorter
    minibatch uses the leading rows, still contiguous), and a .grad tensor on every parameter
    that the step overwrites in place (so Adam and the gradient clip read them as usual)."""

    def __init__(self, model: ActorCritic, rows: int):
        self.rows = rows
        linears = [m for seq in (model.actor, model.critic) for m in seq
                   if isinstance(m, torch.nn.Linear)]
        self.layers = [(m.weight, m.bias) for m in linears]
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
        _attach_grads(self.params)


def _attach_grads(params) -> None:
    """A zero .grad on every parameter that has none (after a zero_grad(set_to_none=True))."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)


class _Compact:
    """The parts of one update's batch the minibatch steps can skip, exactly: the input columns
    that are 0 in every row (20 of the workflow one-hot's 25 when the batch follows one workflow,
    memory and observation bits nothing set) and the actions masked in every row (decoys no host
    in play can carry). A zero column adds exactly 0 to every first-layer product and gets a
    gradient of exactly 0; a masked action's probability is exactly 0 and its logit gets no
    gradient (wfrl.ppo.head). So the steps multiply only the columns and actions in use — on
    recorded default-search batches 87 of 143 columns and 79 of 145 actions, a third of the
    update's arithmetic — and write their gradients back into those columns and rows of the
    full .grad tensors (the rest stay 0, as the full products would make them). The same update
    up to float rounding: the policy head's vector sums run over fewer lanes
    (tests/test_learner.py holds it to the full-width path)."""

    def __init__(self, cols, acts, obs, masks, actions, hidden: int):
        self.cols = torch.from_numpy(cols)
        self.acts = torch.from_numpy(acts)
        self.n_actions = len(acts)
        self.obs = torch.from_numpy(obs)
        self.masks = None if masks is None else torch.from_numpy(masks)
        self.actions = torch.from_numpy(actions)
        nc, na = len(cols), len(acts)
        # the used part of the first layers and the actor's last layer, and their gradients
        self.aw1, self.cw1, self.g_aw1, self.g_cw1 = (torch.empty((hidden, nc)) for _ in range(4))
        self.aw3, self.g_aw3 = torch.empty((na, hidden)), torch.empty((na, hidden))
        self.ab3, self.g_ab3 = torch.empty(na), torch.empty(na)

    @classmethod
    def of(cls, obs: np.ndarray, masks: np.ndarray | None, actions: np.ndarray,
           hidden: int) -> "_Compact | None":
        """The plan for this batch, or None when every column and every action is in use."""
        cols = np.flatnonzero(obs.any(0))
        acts = (np.arange(N_ACTIONS) if masks is None else
                np.union1d(np.flatnonzero(masks.any(0)), actions))   # (a taken action is in)
        if len(cols) == obs.shape[1] and len(acts) == N_ACTIONS:
            return None
        index = np.full(N_ACTIONS, -1, np.int64)
        index[acts] = np.arange(len(acts))
        return cls(cols.astype(np.int64), acts.astype(np.int64), np.ascontiguousarray(obs[:, cols]),
                   None if masks is None else np.ascontiguousarray(masks[:, acts]),
                   index[actions], hidden)


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


def _minibatch_advantages(adv, weight, sl):
    """The advantages of minibatch `sl`: normalised within it, then (a stale batch under the
    decoupled objective) times each step's proximal weight — w·min(r·A, clip(r)·A) =
    min(r·wA, clip(r)·wA) for w > 0."""
    a = adv[sl]
    if a.numel() > 1:
        a = (a - a.mean()) / (a.std() + 1e-8)
    return a if weight is None else a * weight[sl]


class Prepared:
    """The parts of an update that depend only on its batch and on where the learner's generator
    stands when the update starts, made ahead on the thread that built the batch
    (PPOLearner.preparer) while the learner is still busy with the update before: the batch as
    tensors, the _Compact plan, the epochs' permutations, and for every epoch the gathered input
    rows, actions, masks, returns and per-minibatch normalised advantages. An update given one uses it only when it
    fits exactly — the same batch size, epochs, minibatches and plan setting, and the learner's
    generator at state_in (the permutations are then the ones the update would draw itself) —
    and otherwise prepares nothing differently: it draws and gathers as before. Either way the
    same numbers (tests/test_learner.py)."""

    def __init__(self, cfg, compact: bool, batch: Batch, gen_state: torch.Tensor, skip: int):
        n = len(batch)
        self.n, self.epochs, self.minibatches = n, cfg.epochs, cfg.minibatches
        self.hidden, self.compact = cfg.hidden, compact
        g = torch.Generator()
        g.set_state(gen_state)
        for _ in range(cfg.epochs if skip else 0):   # the update before this one draws these
            torch.randperm(skip, generator=g)
        self.state_in = g.get_state()
        perms = [torch.randperm(n, generator=g).numpy() for _ in range(cfg.epochs)]
        self.state_out = g.get_state()
        self.perms = perms
        self.tensors = _batch_tensors(batch)
        obs, actions, _, adv_all, ret_all, masks = self.tensors
        self.plan = None
        if compact and n:
            self.plan = _Compact.of(obs.numpy(), None if masks is None else masks.numpy(),
                                    actions.numpy(), cfg.hidden)
            if self.plan is not None:
                obs, masks, actions = self.plan.obs, self.plan.masks, self.plan.actions
        mb = max(1, -(-n // cfg.minibatches))
        self.epoch_rows = []
        for perm in perms:
            o, a, ad, rt, mk = (None if t is None else torch.from_numpy(np.take(t.numpy(), perm, 0))
                                for t in (obs, actions, adv_all, ret_all, masks))
            adn = torch.cat([_minibatch_advantages(ad, None, slice(i, i + mb))
                             for i in range(0, n, mb)]) if n else ad
            self.epoch_rows.append((o, a, adn, rt, mk))

    def fits(self, learner: "PPOLearner", n: int) -> bool:
        cfg = learner.cfg
        return (n == self.n and cfg.epochs == self.epochs and cfg.minibatches == self.minibatches
                and cfg.hidden == self.hidden and learner.compact == self.compact
                and torch.equal(learner._gen.get_state(), self.state_in))


def _batch_tensors(batch: Batch) -> tuple:
    """(obs, actions, behaviour log-probabilities, advantages, returns, masks) of a batch as
    tensors sharing its memory where the dtypes allow."""
    return (torch.from_numpy(np.ascontiguousarray(batch.obs, np.float32)),
            torch.from_numpy(np.asarray(batch.actions, np.int64)),
            torch.from_numpy(np.ascontiguousarray(batch.logprobs, np.float32)),
            torch.from_numpy(np.ascontiguousarray(batch.advantages, np.float32)),
            torch.from_numpy(np.ascontiguousarray(batch.returns, np.float32)),
            None if batch.masks is None else
            torch.from_numpy(np.ascontiguousarray(batch.masks).view(np.uint8)))


_CRITIC_THREAD = None


def _critic_thread():
    """The one thread the critic's steps of a split update run on (started on first use)."""
    global _CRITIC_THREAD
    if _CRITIC_THREAD is None:
        from concurrent.futures import ThreadPoolExecutor
        _CRITIC_THREAD = ThreadPoolExecutor(1, thread_name_prefix="wfrl-critic")
    return _CRITIC_THREAD


class PPOLearner:
    """reference=True: the original update path (update_reference, unfused Adam) for `update`.
    manual=False: the autograd path the hand-written backward replaced (kept for comparison and
    held equal to it by tests/test_learner.py)."""

    def __init__(self, cfg: PPOConfig, seed: int = 0, reference: bool = False,
                 manual: bool = True, compact: bool = True, split: bool = True,
                 compiled: bool = True):
        self.cfg = cfg
        self.reference = reference
        self.manual = manual and not reference
        self.compact = compact and self.manual
        self.split = split and self.manual   # _split_ok
        self.compiled = compiled and self.manual   # _compiled_ok
        self._net_steps: tuple | None = None   # (key, actor NetStep, critic NetStep)
        self._plan: _Compact | None = None    # this update's (_update)
        self._steps: tuple | None = None      # this update's compiled steps (_compiled_steps)
        self._scratch: _Scratch | None = None
        torch.manual_seed(seed)
        self._gen = torch.Generator().manual_seed(seed)
        self.net = cfg.net()
        self.model = ActorCritic(cfg.hidden, self.net.in_dim)
        self.opt = _adam(self.model.parameters(), cfg.lr, fused=not reference)
        self.version = 0
        self.entropy_coef = cfg.entropy_coef
        self.kl_stops = 0   # updates this learner ended early by the KL stop

    def set_progress(self, frac: float) -> None:
        """Move the learning rate and entropy weight along their schedules: frac is the share of
        the run's episodes already trained on (0 at the start, 1 at the end)."""
        frac = min(max(float(frac), 0.0), 1.0)
        cfg = self.cfg
        for g in self.opt.param_groups:
            g["lr"] = cfg.lr * (1.0 + (cfg.lr_final - 1.0) * frac)
        self.entropy_coef = cfg.entropy_coef * (1.0 + (cfg.entropy_final - 1.0) * frac)

    def flat_weights(self) -> np.ndarray:
        return self.model.flat_weights()

    def update(self, batch: Batch, between=None, stale: bool = False,
               prepared: "Prepared | None" = None) -> dict:
        """One PPO update on `batch`; returns the mean of each statistic over its minibatches.
        between(), if given, runs before every minibatch step (the overlapped trainer gives the
        learner back its threads there once the batch collected meanwhile is in).
        stale: the batch was played by weights older than the learner's (overlap); with
        cfg.decoupled the update then uses the decoupled objective (see proximal_weights). The
        reference path (reference=True) is ordinary PPO only and refuses a stale batch then.
        prepared: this batch's Prepared (made ahead by preparer()), used where it fits."""
        if self.reference:
            if stale and self.cfg.decoupled:
                raise ValueError("the reference update has no decoupled objective for a stale batch")
            return self.update_reference(batch)
        # Python's cycle collector would otherwise run every few hundred tensor allocations and
        # walk every object torch created at import (5-10 % of an update); what an update leaves
        # behind holds no cycles, reference counting frees it.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._update(batch, between, stale, prepared)
        finally:
            self._steps = None     # (they hold this update's tensors; made again by the next)
            if enabled:
                gc.enable()

    def _update(self, batch: Batch, between, stale: bool, prepared) -> dict:
        cfg = self.cfg
        n = len(batch)
        split = n and self._split_ok(between)
        if not (split and prepared is not None and prepared.fits(self, n)):
            prepared = None    # (the one-thread loop draws its permutations epoch by epoch)
        obs, actions, old_logp, adv_all, ret_all, masks = (
            _batch_tensors(batch) if prepared is None else prepared.tensors)
        mb = max(1, -(-n // cfg.minibatches))
        groups = self.clip_groups()
        step = self._manual_step if self.manual else self._autograd_step
        self._plan = plan = None
        if self.compact and n:
            self._plan = plan = (
                prepared.plan if prepared is not None else
                _Compact.of(obs.numpy(), None if masks is None else masks.numpy(),
                            actions.numpy(), cfg.hidden))
            if plan is not None:
                obs, masks, actions = plan.obs, plan.masks, plan.actions
                # what the plan leaves out stays 0 (a missing .grad: _Scratch.attach_grads)
                self.model.zero_grad(set_to_none=False)
        weight_all = None
        decoupled = stale and cfg.decoupled and n
        self._steps = self._compiled_steps() if n else None
        if split:
            sources = (obs, actions, old_logp, adv_all, ret_all, masks, None)
            return self._finish(self._split_epochs(sources, n, mb, decoupled, prepared))
        if decoupled:
            old_logp, weight_all = self.proximal_weights(obs, actions, old_logp, masks, plan)
        sources = (obs, actions, old_logp, adv_all, ret_all, masks, weight_all)
        gathered = [None if t is None else np.empty(t.shape, t.numpy().dtype) for t in sources]
        stats = []
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self._gen).numpy()
            # numpy's row gather into buffers kept for the update: a third of the time of
            # torch's index_select here, the same values
            o, a, lp0, ad, rt, mk, wt = (None if t is None else
                                         torch.from_numpy(np.take(t.numpy(), perm, 0, out=g))
                                         for t, g in zip(sources, gathered))
            for start in range(0, n, mb):
                if between is not None:
                    between()
                sl = slice(start, start + mb)
                got = step(o[sl], None if mk is None else mk[sl], a[sl], lp0[sl],
                           _minibatch_advantages(ad, wt, sl), rt[sl], groups)
                if got is None:          # the KL stop
                    break
                stats.append(got)
            else:
                continue
            break   # the KL stop ends the whole update, not only this epoch
        return self._finish(stats)

    def _finish(self, stats: list) -> dict:
        """The end of an update: the version moves on; the mean of each statistic over its
        minibatch steps."""
        self.version += 1
        if not stats:
            return dict.fromkeys(STAT_NAMES, 0.0)
        return dict(zip(STAT_NAMES, np.mean(np.asarray(stats, np.float64), axis=0).tolist()))

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

    @torch.no_grad()
    def _manual_step(self, x, mk, a, lp0, adv, ret, groups):
        """The same minibatch step with the backward pass written out: every matrix product
        into a buffer kept between steps, the gradients straight into each parameter's .grad,
        no autograd graph (see _Scratch); or, where _compiled_ok, each network's whole step in
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
            _clip_grad_norm([p.grad for p in group], self.cfg.max_grad_norm)
        self._adam_step()
        pg, ent, kl, clipped = got
        return pg, v_loss, ent, kl, clipped   # STAT_NAMES order

    def _compiled_ok(self) -> bool:
        """Whether this update's minibatch steps may run compiled (csrc/wfrl_update.h, one call
        per network and minibatch): the hand-written path with compiled=True, each network
        clipped alone (the C step clips the network it steps), no KL stop (the C step does not
        stop between its forward and backward passes), a plain fused Adam (whose kernel it
        replaces) and a CPU with AVX-512 (COMPILED_FAST; elsewhere the C products are slower
        than torch's)."""
        cfg = self.cfg
        return (self.compiled and COMPILED_FAST and cfg.clip_per_net and cfg.target_kl == 0
                and self._adam_plain())

    def _compiled_steps(self) -> "tuple | None":
        """(actor, critic) NetStep over the parameters, gradients and Adam state this update
        steps, or None where _compiled_ok does not hold. Made again when any of those tensors
        is a new one (a loaded state, a gradient set to None and remade)."""
        if not self._compiled_ok():
            return None
        self._adam_first_state()
        _attach_grads(self.model.parameters())     # (the C step writes every .grad)
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

    def _actor_step(self, x, mk, a, lp0, adv, params) -> tuple:
        """The actor's whole minibatch step (under no_grad): its gradients, their clip and its
        Adam step; returns (surrogate, entropy, approximate KL, clipped share). Compiled where
        this update's steps are (_compiled_steps), else the torch path."""
        if self._steps is None:
            got = self._actor_grads(x, mk, a, lp0, adv)
            _clip_grad_norm([p.grad for p in params], self.cfg.max_grad_norm)
            self._adam_params(params)
            return got
        pg, ent, kl, clipped, _ = self._steps[0].actor_step(
            *self._compiled_rows(x, mk, self._plan), a.numpy(), lp0.numpy(),
            np.ascontiguousarray(adv.numpy()), float(self.cfg.clip), float(self.entropy_coef),
            float(self.opt.param_groups[0]["lr"]))
        return pg, ent, kl, clipped

    @staticmethod
    def _compiled_rows(x, masks, plan) -> tuple:
        """What a compiled actor call takes for rows x: (x, the input columns in use, the
        actions in use — None for every one without a plan —, the allowed-action mask, all
        ones for an unmasked policy), as numpy arrays."""
        allowed = (masks.numpy() if masks is not None else _all_allowed(
            (x.shape[0], N_ACTIONS if plan is None else plan.n_actions)))
        return (x.numpy(), None if plan is None else plan.cols.numpy(),
                None if plan is None else plan.acts.numpy(), allowed)

    def _critic_step(self, x, ret, params) -> float:
        """The critic's whole minibatch step (under no_grad), as _actor_step; returns the value
        loss."""
        if self._steps is None:
            v_loss = self._critic_grads(x, ret)
            _clip_grad_norm([p.grad for p in params], self.cfg.max_grad_norm)
            self._adam_params(params)
            return v_loss
        plan = self._plan
        v_loss, _ = self._steps[1].critic_step(
            x.numpy(), None if plan is None else plan.cols.numpy(), ret.numpy(),
            float(self.cfg.value_coef), float(self.opt.param_groups[0]["lr"]))
        return v_loss

    def preparer(self, before: int):
        """A function of a batch that returns its Prepared for this learner's next update but
        one — the update on a batch of `before` rows comes first (0: none) — or None where no
        update would use it; safe to call on another thread while this learner updates (it
        reads a copy of the generator's state taken now)."""
        if not self._split_possible():
            return lambda batch: None     # (no split update would use it)
        cfg, compact, state = self.cfg, self.compact, self._gen.get_state()
        return lambda batch: Prepared(cfg, compact, batch, state, before)

    def _ensure_scratch(self, rows: int) -> "_Scratch":
        s = self._scratch
        if s is None or s.rows < rows:
            s = self._scratch = _Scratch(self.model, rows)
        s.attach_grads()      # after a zero_grad(set_to_none=True) elsewhere
        return s

    def _actor_grads(self, x, mk, a, lp0, adv):
        """The actor's part of a minibatch step (under no_grad): forward, the compiled policy head,
        the backward, its gradients written into the actor's .grad. Returns (surrogate, entropy,
        approximate KL, clipped share), or None on the KL stop (before any backward)."""
        cfg = self.cfg
        k = x.shape[0]
        s = self._scratch
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
        the backward is the hand-written one, each network is clipped alone, no KL stop."""
        cfg = self.cfg
        return self.split and self.manual and cfg.clip_per_net and cfg.target_kl == 0

    def _split_epochs(self, sources, n: int, mb: int, decoupled: bool, prepared=None) -> list:
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
        proximal log-probabilities and weights are gathered here."""
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
                                          _minibatch_advantages(ad, wt, sl))
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
            return out

        job = _critic_thread().submit(critic)
        actor_stats = []
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

    # Largest importance weight of a stale step (a guard: one update apart, weights stay near 1).
    MAX_PROXIMAL_WEIGHT = 10.0

    @torch.no_grad()
    def proximal_weights(self, obs, actions, behaviour_logp, masks, plan=None):
        """Decoupled PPO (Hilton et al. 2021, "Batch size-invariance for policy optimization")
        for a batch played by stale weights: the ratio is clipped against the proximal policy —
        the learner's policy before this update — instead of the behaviour policy, and each step
        is weighted by π_prox(a|s) / π_behav(a|s) (at most MAX_PROXIMAL_WEIGHT). With fresh
        weights the two policies are the same and this is ordinary PPO. Returns (proximal
        log-probabilities, weights). With a _Compact plan, obs, actions and masks are the plan's
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

    def update_reference(self, batch: Batch) -> dict:
        """The original update path (see the module docstring)."""
        cfg = self.cfg
        obs = torch.as_tensor(batch.obs)
        actions = torch.as_tensor(batch.actions, dtype=torch.int64)
        old_logp = torch.as_tensor(batch.logprobs)
        adv_all = torch.as_tensor(batch.advantages)
        ret_all = torch.as_tensor(batch.returns)
        masked = None if batch.masks is None else ~torch.as_tensor(batch.masks)
        n = len(batch)
        mb = max(1, -(-n // cfg.minibatches))
        groups = self.clip_groups()
        stats = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0,
                 "clip_frac": 0.0}
        steps = 0
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self._gen)
            for start in range(0, n, mb):
                idx = perm[start:start + mb]
                logits, value = self.model(obs[idx])
                if masked is not None:  # the same logit the rollout loop gives a masked action
                    logits = logits.masked_fill(masked[idx], MASKED_LOGIT)
                # Categorical log-probabilities and entropy, without torch.distributions'
                # argument checking (a third of the update's time at this network size).
                log_p = torch.log_softmax(logits, dim=-1)
                logp = log_p.gather(1, actions[idx].unsqueeze(1)).squeeze(1)
                adv = adv_all[idx]
                if len(idx) > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                log_ratio = logp - old_logp[idx]
                ratio = log_ratio.exp()
                pg_loss = torch.max(-adv * ratio,
                                    -adv * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)).mean()
                v_loss = 0.5 * (value - ret_all[idx]).pow(2).mean()
                entropy = -(log_p.exp() * log_p).sum(-1).mean()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean().item()
                if self.kl_exceeded(approx_kl):
                    break
                loss = pg_loss + cfg.value_coef * v_loss - self.entropy_coef * entropy
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                for group in groups:
                    torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm)
                self.opt.step()
                with torch.no_grad():
                    stats["policy_loss"] += pg_loss.item()
                    stats["value_loss"] += v_loss.item()
                    stats["entropy"] += entropy.item()
                    stats["approx_kl"] += approx_kl
                    stats["clip_frac"] += ((ratio - 1).abs() > cfg.clip).float().mean().item()
                steps += 1
            else:
                continue
            break
        self.version += 1
        return {k: v / max(steps, 1) for k, v in stats.items()}

    def state(self) -> dict:
        """Everything needed to continue training; loadable with torch.load(weights_only=True)."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "version": self.version, "rng": self._gen.get_state()}

    def load_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if "optimizer" in state:
            self.opt.load_state_dict(state["optimizer"])
        self.version = int(state.get("version", 0))
        if "rng" in state:  # the minibatch shuffles continue exactly where they stopped
            self._gen.set_state(state["rng"])
