"""The learner learns: PPO on a tiny task with a known optimum, through the real buffer, GAE and
batch path the collectors use (no CybORG)."""
import os

import numpy as np
import pytest
import torch

from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.config.run import PPOConfig
from wfrl.ppo.batch import Batch, to_batch
from wfrl.ppo.learner import PPOLearner
from wfrl.ppo.netspec import IN_DIM, NumpyPolicy
from wfrl.workflow import Workflow

K, L = 6, 10  # targets, steps per episode
WF_A = Workflow.parse("balanced")
WF_B = Workflow.parse("reverse")


def correct_action(target, wf):
    # The best action depends on the observation and on the workflow conditioning.
    return 15 + target if wf == WF_A else 132 + target


def play(policy, wf, rng, buffer=None, row=0, greedy=False):
    x = np.zeros(IN_DIM, np.float32)
    x[52:] = wf.onehot()
    total = 0.0
    for t in range(L):
        target = int(rng.integers(K))
        x[:52] = 0
        x[target] = 1
        a, logp, v = policy.act(x, rng, greedy)
        r = 1.0 if a == correct_action(target, wf) else 0.0
        total += r
        if buffer is not None:
            buffer.push(row, x[:52].copy(), a, logp, v, r, t == L - 1, np.zeros(13, np.uint8))
    return total


@pytest.mark.slow
def test_ppo_reaches_the_known_optimum():
    # gamma 0: every step is an independent decision, so the optimum is reachable exactly.
    learner = PPOLearner(PPOConfig(hidden=32, gamma=0.0), seed=0)
    rng = np.random.default_rng(0)
    n_rows = 32
    buffer = compiled_buffer(allocate_trajectory(n_rows, L))
    wfs = [WF_A if i % 2 == 0 else WF_B for i in range(n_rows)]
    row_cond = np.stack([w.onehot() for w in wfs])
    first = None
    for _update in range(100):
        policy = NumpyPolicy(learner.flat_weights(), 32)
        buffer.clear()
        returns = [play(policy, wfs[i], rng, buffer, i) for i in range(n_rows)]
        first = np.mean(returns) if first is None else first
        stats = learner.update(to_batch(buffer, row_cond, 0.0, 0.95))
    policy = NumpyPolicy(learner.flat_weights(), 32)
    greedy = [play(policy, wf, rng, greedy=True) for wf in (WF_A, WF_B) for _ in range(20)]
    assert first < 1.0                   # starts near random (10/145 per episode)
    assert np.mean(greedy) >= 0.95 * L   # optimum is L
    assert stats["value_loss"] < 0.05      # the critic learned the per-step value too
    assert learner.version == 100


@pytest.fixture
def compiled_on_any_cpu(monkeypatch):
    """The learner's compiled steps on whatever CPU runs the tests (without AVX-512 they use the
    narrow tiling: slower than torch's, the same numbers)."""
    import wfrl.ppo.learner as learner_module
    monkeypatch.setattr(learner_module, "COMPILED_FAST", True)


def _recorded_batch(mask: bool, seed: int = 3):
    """A real batch: simulator episodes of an untrained policy through the collector and to_batch
    (memory block and mask as configured)."""
    from wfrl.collect.base import make_collector
    cfg = PPOConfig(hidden=32, memory=mask, mask=mask)
    learner = PPOLearner(cfg, seed=seed)
    wf = Workflow.parse("critical_first")
    col = make_collector("sequential", "sim", "mixed", cfg.net(), seed, 30.0, False, 1, 12)
    try:
        col.collect(learner.flat_weights(), 0, wf, 100, 12)
        return cfg, to_batch(col.buffer, np.tile(wf.onehot(), (12, 1)), cfg.gamma,
                             cfg.gae_lambda, cfg.net())
    finally:
        col.close()


@pytest.mark.parametrize("mask", [True, False])
def test_fast_update_equals_the_reference_update(mask):
    # The default update (additive mask, per-epoch gathers, fused Adam) against the original code
    # path on the same real batch, three updates in a row: the same statistics and weights up to
    # float32 rounding, and the same minibatch shuffles (the generators end in the same state).
    cfg, batch = _recorded_batch(mask)
    if mask:
        assert not batch.masks.all()           # some actions really are masked
    fast, ref = PPOLearner(cfg, seed=9), PPOLearner(cfg, seed=9, reference=True)
    np.testing.assert_array_equal(fast.flat_weights(), ref.flat_weights())
    for _ in range(3):
        sf, sr = fast.update(batch), ref.update(batch)
        for k in sr:
            assert sf[k] == pytest.approx(sr[k], rel=1e-4, abs=1e-6), k
    np.testing.assert_allclose(fast.flat_weights(), ref.flat_weights(), rtol=1e-4, atol=1e-5)
    assert not np.allclose(fast.flat_weights(), PPOLearner(cfg, seed=9).flat_weights())  # moved
    assert fast._gen.get_state().equal(ref._gen.get_state())
    assert fast.version == ref.version == 3


def _count_steps(learner):
    """Count the optimiser steps: opt.step on the reference path, _adam_step (which calls torch's
    fused kernel itself) on the others."""
    calls = [0]
    name = "step" if learner.reference else "_adam_step"
    owner = learner.opt if learner.reference else learner
    orig = getattr(owner, name)

    def step(*args, **kw):
        calls[0] += 1
        return orig(*args, **kw)
    setattr(owner, name, step)
    return calls


def test_kl_early_stop_ends_the_update_on_both_paths():
    # The minibatches' KL from the batch's policy, seen by an update without the stop, grows as
    # the policy moves; with a target between two of them both paths step exactly up to the
    # first minibatch beyond 1.5 × target, to the same weights; a target no minibatch reaches
    # changes nothing against no target at all.
    import dataclasses
    cfg, batch = _recorded_batch(True)
    probe = PPOLearner(cfg, seed=9)
    seen, check = [], probe.kl_exceeded
    probe.kl_exceeded = lambda kl: (seen.append(kl), check(kl))[1]
    probe.update(batch)
    assert len(seen) == cfg.epochs * cfg.minibatches and seen[-1] > 100 * seen[0]
    target = (seen[9] + seen[10]) / 2 / 1.5
    want = next(i for i, kl in enumerate(seen) if kl > 1.5 * target)
    assert 1 <= want < len(seen)

    stop = dataclasses.replace(cfg, target_kl=target)
    fast, ref = PPOLearner(stop, seed=9), PPOLearner(stop, seed=9, reference=True)
    steps = [_count_steps(fast), _count_steps(ref)]
    sf, sr = fast.update(batch), ref.update(batch)
    assert [c[0] for c in steps] == [want, want]
    assert fast.kl_stops == ref.kl_stops == 1
    assert sf["approx_kl"] == pytest.approx(np.mean(seen[:want]), rel=1e-3)
    assert sr["approx_kl"] == pytest.approx(sf["approx_kl"], rel=1e-3)
    np.testing.assert_allclose(fast.flat_weights(), ref.flat_weights(), rtol=1e-4, atol=1e-5)
    assert fast.version == ref.version == 1

    off, huge = PPOLearner(cfg, seed=9), PPOLearner(dataclasses.replace(cfg, target_kl=1e9), seed=9)
    counts = [_count_steps(off), _count_steps(huge)]
    off.update(batch)
    huge.update(batch)
    assert [c[0] for c in counts] == [len(seen)] * 2
    assert huge.kl_stops == 0
    np.testing.assert_array_equal(off.flat_weights(), huge.flat_weights())
    np.testing.assert_array_equal(off.flat_weights(), probe.flat_weights())
    assert not np.array_equal(off.flat_weights(), fast.flat_weights())


@pytest.mark.parametrize("reference", [False, True])
def test_clip_per_net_keeps_the_actor_step_apart_from_the_critic_loss(reference):
    # One minibatch step with the critic's loss scaled up a million times: clipped per network,
    # the actor moves exactly as with the ordinary scale; clipped jointly (the default), the
    # critic's huge gradient shrinks the actor's step.
    import dataclasses
    cfg, batch = _recorded_batch(True)
    cfg = dataclasses.replace(cfg, epochs=1, minibatches=1)

    def actor_after(**kw):
        lrn = PPOLearner(dataclasses.replace(cfg, **kw), seed=9, reference=reference)
        lrn.update(batch)
        return np.concatenate([p.detach().numpy().ravel() for p in lrn.model.actor.parameters()])

    start = np.concatenate([p.detach().numpy().ravel()
                            for p in PPOLearner(cfg, seed=9).model.actor.parameters()])
    apart = actor_after(clip_per_net=True)
    np.testing.assert_array_equal(apart, actor_after(clip_per_net=True, value_coef=5e5))
    joint, joint_big = actor_after(), actor_after(value_coef=5e5)
    assert np.abs(joint_big - start).max() < 0.1 * np.abs(joint - start).max()
    assert np.abs(apart - start).max() > 0.5 * np.abs(joint - start).max()


def test_fast_update_masked_actions_get_no_gradient_and_no_probability():
    # A masked action's logit receives no gradient through the added bias: its weights row of the
    # actor's last layer stays where it was when every sample masks it.
    cfg, batch = _recorded_batch(True)
    batch.masks[:, 7] = False
    batch.actions[batch.actions == 7] = 8
    learner = PPOLearner(cfg, seed=2)
    last = learner.model.actor[4]
    before_w, before_b = last.weight[7].detach().clone(), last.bias[7].item()
    learner.update(batch)
    # Adam moves a parameter only when it got a gradient at some step
    assert np.array_equal(last.weight[7].detach().numpy(), before_w.numpy())
    assert last.bias[7].item() == before_b
    assert not np.array_equal(last.weight[8].detach().numpy(), before_w.numpy())


def _decoupled_reference_loss(learner, batch, prox_logp, weight, clip):
    """The decoupled surrogate written out in torch for one full-batch minibatch:
    −mean(w · min(r·A, clip(r)·A)) with r = π/π_prox and w = π_prox/π_behav."""
    import torch

    from wfrl.features import MASKED_LOGIT
    logits, _ = learner.model(torch.from_numpy(batch.obs))
    logits = logits.masked_fill(~torch.from_numpy(batch.masks), MASKED_LOGIT)
    logp = torch.log_softmax(logits, -1).gather(
        1, torch.from_numpy(batch.actions.astype(np.int64)).unsqueeze(1)).squeeze(1)
    adv = torch.from_numpy(batch.advantages)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    r = (logp - prox_logp).exp()
    return -(weight * torch.min(r * adv, r.clamp(1 - clip, 1 + clip) * adv)).mean()


def test_decoupled_update_on_a_fresh_batch_is_the_ordinary_update():
    # A batch whose behaviour log-probabilities are the learner's own: the proximal weights are 1
    # and the update moves the weights as the ordinary one does (up to float rounding).
    cfg, batch = _recorded_batch(True)
    a, b = PPOLearner(cfg, seed=3), PPOLearner(cfg, seed=3)   # the weights that played it
    import torch
    obs = torch.from_numpy(batch.obs)
    prox, w = a.proximal_weights(obs, torch.from_numpy(batch.actions.astype(np.int64)),
                                 torch.from_numpy(batch.logprobs),
                                 torch.from_numpy(batch.masks.view(np.uint8)))
    np.testing.assert_allclose(prox.numpy(), batch.logprobs, atol=2e-5)
    np.testing.assert_allclose(w.numpy(), 1.0, atol=5e-5)
    a.update(batch, stale=True)
    b.update(batch)
    np.testing.assert_allclose(a.flat_weights(), b.flat_weights(), rtol=1e-3, atol=1e-5)


def test_decoupled_update_on_a_stale_batch():
    # A batch played by the weights of one update ago: the first minibatch step's gradient is the
    # gradient of the decoupled surrogate written out in torch (ratio against the learner's
    # pre-update policy, steps weighted by π_prox/π_behav), and not the stale-ratio one's; with
    # decoupled off, stale=True changes nothing.
    import copy
    import dataclasses

    import torch
    cfg, batch = _recorded_batch(True)
    cfg = dataclasses.replace(cfg, epochs=1, minibatches=1, entropy_coef=0.0, value_coef=0.0,
                              max_grad_norm=1e9, lr=1e-3)
    base = PPOLearner(dataclasses.replace(cfg, lr=0.02, epochs=4, minibatches=4), seed=5)
    base.update(batch)                          # now the batch is one update stale for `base`
    state = base.state()

    def fresh(c=cfg):
        lrn = PPOLearner(c, seed=5)
        lrn.load_state(copy.deepcopy(state))   # (load_state keeps the optimizer's tensors)
        return lrn

    act = torch.from_numpy(batch.actions.astype(np.int64))
    masks = torch.from_numpy(batch.masks.view(np.uint8))
    lrn = fresh()
    prox, w = lrn.proximal_weights(torch.from_numpy(batch.obs), act,
                                   torch.from_numpy(batch.logprobs), masks)
    assert float(((w - 1).abs() > cfg.clip).float().mean()) > 0.05   # stale beyond the clip
    ref = fresh()
    ref.model.zero_grad()
    _decoupled_reference_loss(ref, batch, prox, w, cfg.clip).backward()
    want = torch.cat([p.grad.flatten() for p in ref.model.actor.parameters()])

    grads = {}
    for stale in (True, False):
        lrn = fresh()
        orig_step = lrn._adam_step

        def capture(*args, _l=lrn, _s=stale, _o=orig_step, **kw):
            grads[_s] = torch.cat([p.grad.flatten().clone() for p in _l.model.actor.parameters()])
            return _o(*args, **kw)
        lrn._adam_step = capture
        lrn.update(batch, stale=stale)
    np.testing.assert_allclose(grads[True].numpy(), want.numpy(), rtol=1e-3, atol=1e-6)
    assert not np.allclose(grads[False].numpy(), want.numpy(), rtol=1e-3, atol=1e-6)

    off = dataclasses.replace(cfg, decoupled=False)
    x, y = fresh(off), fresh(off)
    x.update(batch, stale=True)
    y.update(batch)
    np.testing.assert_array_equal(x.flat_weights(), y.flat_weights())


@pytest.mark.parametrize("kw,stale", [({}, False), ({"clip_per_net": True}, False),
                                      ({"minibatches": 7}, False), ({}, True),
                                      ({"mask": False, "memory": False}, False)])
def test_hand_written_backward_equals_autograd_bit_for_bit(kw, stale):
    # The default update (gradients written out, no autograd graph) against the autograd path it
    # replaced, on the same real batch, three updates in a row: the same weights, optimiser state
    # and statistics to the last bit — with per-network clipping, a short last minibatch (1,200
    # steps in 7 minibatches), a stale batch (the decoupled objective) and without the mask.
    import dataclasses
    cfg, batch = _recorded_batch(kw.get("mask", True))
    cfg = dataclasses.replace(cfg, **kw)
    if not cfg.memory:   # the observation-only network: no memory block, every action allowed
        batch.obs = np.ascontiguousarray(np.concatenate([batch.obs[:, :52], batch.obs[:, -25:]], 1))
        batch.masks = None
    # (full width: the products the autograd path makes; the compact plan is tested below)
    manual = PPOLearner(cfg, seed=9, compact=False, compiled=False)
    auto = PPOLearner(cfg, seed=9, manual=False)
    assert manual.manual and not auto.manual
    for _ in range(3):
        sm, sa = manual.update(batch, stale=stale), auto.update(batch, stale=stale)
        assert sm == sa
    np.testing.assert_array_equal(manual.flat_weights(), auto.flat_weights())
    assert not np.array_equal(manual.flat_weights(), PPOLearner(cfg, seed=9).flat_weights())
    for p, q in zip(manual.model.parameters(), auto.model.parameters()):
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(manual.opt.state[p][key].numpy(),
                                          auto.opt.state[q][key].numpy())


@pytest.mark.parametrize("kw,stale", [({}, False), ({"clip_per_net": True}, True),
                                      ({"minibatches": 7}, False),
                                      ({"mask": False, "memory": False}, False)])
@pytest.mark.parametrize("compiled", [True, False])
def test_compact_update_equals_the_full_width_update(kw, stale, compiled):
    # The default update multiplies only the input columns and actions the batch uses
    # (Compact); against the same update over every column and action, three updates on a real
    # batch: the same statistics and weights up to float32 rounding, the same optimiser state,
    # and the gradient of every skipped column and action exactly 0 (as the full products give).
    import dataclasses
    cfg, batch = _recorded_batch(kw.get("mask", True))
    cfg = dataclasses.replace(cfg, **kw)
    if not cfg.memory:
        batch.obs = np.ascontiguousarray(np.concatenate([batch.obs[:, :52], batch.obs[:, -25:]], 1))
        batch.masks = None
    from wfrl.ppo.prepare import Compact
    plan = Compact.of(batch.obs, None if batch.masks is None else batch.masks.view(np.uint8),
                       batch.actions.astype(np.int64), cfg.hidden)
    assert plan is not None and len(plan.cols) < batch.obs.shape[1]   # zero columns to skip
    if cfg.mask:
        assert plan.n_actions < 145                                    # and unused actions
    compact = PPOLearner(cfg, seed=9, compiled=compiled)
    full = PPOLearner(cfg, seed=9, compact=False, compiled=compiled)
    skipped = np.setdiff1d(np.arange(batch.obs.shape[1]), plan.cols.numpy())
    for _ in range(3):
        sc, sf = compact.update(batch, stale=stale), full.update(batch, stale=stale)
        assert compact._plan is not None and full._plan is None
        for key in sc:
            assert sc[key] == pytest.approx(sf[key], rel=1e-4, abs=1e-6), key
        actor_w1 = compact.model.actor[0].weight.grad.numpy()
        assert not actor_w1[:, skipped].any()
        np.testing.assert_allclose(actor_w1, full.model.actor[0].weight.grad.numpy(),
                                   rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(compact.flat_weights(), full.flat_weights(), rtol=1e-4, atol=1e-6)
    assert not np.allclose(compact.flat_weights(), PPOLearner(cfg, seed=9).flat_weights(),
                           rtol=1e-4, atol=1e-6)
    for p, q in zip(compact.model.parameters(), full.model.parameters()):
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(compact.opt.state[p][key].numpy(),
                                       full.opt.state[q][key].numpy(), rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("kw,stale", [({}, False), ({}, True), ({"minibatches": 7}, False),
                                      ({"hidden": 24}, False),
                                      ({"mask": False, "memory": False}, False)])
@pytest.mark.parametrize("compact", [True, False])
def test_compiled_steps_equal_the_torch_steps(kw, stale, compact, one_thread,
                                              compiled_on_any_cpu):
    # Each network's minibatch step in C (csrc/wfrl_update.h: products, policy head or value
    # loss, backward, clip, Adam) against the same step through torch's products and fused Adam
    # (compiled=False), four updates in a row on a real batch (the first on one thread, the
    # rest split over two): the same statistics, weights, gradients and Adam state up to float
    # rounding, the same step counters and shuffles — with a short last minibatch, a hidden
    # width that is no multiple of 16 (padded lanes), a stale batch, every column and action
    # (compact=False) and the unmasked observation-only network.
    import dataclasses
    cfg, batch = _recorded_batch(kw.get("mask", True))
    cfg = dataclasses.replace(cfg, clip_per_net=True, **kw)
    if not cfg.memory:
        batch.obs = np.ascontiguousarray(np.concatenate([batch.obs[:, :52], batch.obs[:, -25:]], 1))
        batch.masks = None
    c = PPOLearner(cfg, seed=9, compact=compact)
    t = PPOLearner(cfg, seed=9, compact=compact, compiled=False)
    for k in range(4):
        c.set_progress(k / 4)     # (a learning rate that moves)
        t.set_progress(k / 4)
        sc, st = c.update(batch, stale=stale), t.update(batch, stale=stale)
        assert c._net_steps is not None and t._net_steps is None      # (each path ran)
        for key in sc:
            assert sc[key] == pytest.approx(st[key], rel=1e-4, abs=1e-6), key
    np.testing.assert_allclose(c.flat_weights(), t.flat_weights(), rtol=1e-4, atol=2e-6)
    assert not np.allclose(c.flat_weights(), PPOLearner(cfg, seed=9).flat_weights(),
                           rtol=1e-4, atol=2e-6)
    for p, q in zip(c.model.parameters(), t.model.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-3, atol=1e-6)
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(c.opt.state[p][key].numpy(), t.opt.state[q][key].numpy(),
                                       rtol=1e-3, atol=1e-7)
        assert float(c.opt.state[p]["step"]) == float(t.opt.state[q]["step"])
    assert c._gen.get_state().equal(t._gen.get_state())


@pytest.mark.parametrize("compact", [True, False])
def test_compiled_proximal_pass_equals_the_torch_one(compact, compiled_on_any_cpu):
    # The decoupled objective's proximal pass in C (NetStep.actor_logp) against torch's: the
    # same log-probabilities and weights up to float rounding, on a real batch with one taken
    # action masked (log-probability -inf, weight 0) and weights that reach the cap.
    import dataclasses
    cfg, batch = _recorded_batch(True)
    lrn = PPOLearner(dataclasses.replace(cfg, clip_per_net=True), seed=9, compact=compact)
    obs = torch.from_numpy(batch.obs)
    masks = torch.from_numpy(batch.masks.view(np.uint8).copy())
    actions = torch.from_numpy(batch.actions.astype(np.int64))
    masks[0, actions[0]] = 0
    behaviour = torch.from_numpy(batch.logprobs.copy())
    behaviour[1:40] -= 3.0                                   # weights above the cap of 10
    from wfrl.ppo.prepare import Compact
    plan = Compact.of(obs.numpy(), masks.numpy(), actions.numpy(), cfg.hidden) if compact else None
    if plan is not None:
        obs, masks, actions = plan.obs, plan.masks, plan.actions
    lrn._plan = plan
    want = lrn.proximal_weights(obs, actions, behaviour, masks, plan)
    lrn._steps = lrn._compiled_steps()
    got = lrn.proximal_weights(obs, actions, behaviour, masks, plan)
    assert got[0][0] == -np.inf and want[0][0] == -np.inf and got[1][0] == 0 == want[1][0]
    np.testing.assert_allclose(got[0][1:].numpy(), want[0][1:].numpy(), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(got[1].numpy(), want[1].numpy(), rtol=2e-5, atol=1e-6)
    assert (got[1] == PPOLearner.MAX_PROXIMAL_WEIGHT).sum() > 10
    masks[2] = 0
    with pytest.raises(ValueError, match="allow no action"):
        lrn.proximal_weights(obs, actions, behaviour, masks, plan)


def test_compiled_steps_only_where_they_apply(monkeypatch):
    # The C step clips the network it steps and does not stop between its passes: the joint clip
    # and the KL stop keep the torch steps; so do compiled=False and a CPU without AVX-512
    # (COMPILED_FAST false). Where it is true, on any CPU, the rest take the compiled steps.
    import dataclasses

    import wfrl.ppo.learner as learner_module
    cfg, batch = _recorded_batch(True)
    on = dataclasses.replace(cfg, clip_per_net=True)
    lrn = PPOLearner(on, seed=9)
    lrn.update(batch)
    assert (lrn._net_steps is not None) == learner_module.COMPILED_FAST   # as this CPU decides
    monkeypatch.setattr(learner_module, "COMPILED_FAST", False)
    lrn = PPOLearner(on, seed=9)
    lrn.update(batch)
    assert lrn._net_steps is None
    monkeypatch.setattr(learner_module, "COMPILED_FAST", True)
    for kw, compiled, want in (({"clip_per_net": True}, True, True),
                               ({"clip_per_net": False}, True, False),
                               ({"clip_per_net": True, "target_kl": 1.0}, True, False),
                               ({"clip_per_net": True}, False, False)):
        lrn = PPOLearner(dataclasses.replace(cfg, **kw), seed=9, compiled=compiled)
        lrn.update(batch)
        assert (lrn._net_steps is not None) == want, kw


def test_compiled_step_refuses_bad_input():
    # The binding checks what the C step would read out of bounds: one line each.
    from wfrl import _core
    H, I, O = 16, 8, 5
    rng = np.random.default_rng(0)
    shapes = ((H, I), (H,), (H, H), (H,), (O, H), (O,))

    def group():
        return [rng.standard_normal(s).astype(np.float32) for s in shapes]
    steps = [np.zeros((), np.float32) for _ in shapes]
    net = _core.NetStep(group(), group(), group(), group(), steps, 0.9, 0.999, 1e-5, 0.5)
    x = rng.random((4, I), dtype=np.float32)
    ok = dict(cols=None, acts=None, allowed=np.ones((4, O), np.uint8),
              actions=np.array([0, 1, 2, 4]), old_logp=np.full(4, -1.6, np.float32),
              adv=np.ones(4, np.float32))

    def actor(**kw):
        a = {**ok, **kw}
        return net.actor_step(np.ascontiguousarray(x[:, :a.pop("width", I)]), a["cols"], a["acts"], a["allowed"],
                              a["actions"], a["old_logp"], a["adv"], 0.2, 0.01, 1e-3)
    assert len(actor()) == 5 and float(steps[0]) == 1.0
    for kw, match in (({"actions": np.array([0, 1, 2, 5])}, "outside"),
                      ({"allowed": np.ones((4, O - 1), np.uint8)}, "allowed"),
                      ({"width": I - 1}, "columns"),
                      ({"width": 3, "cols": np.array([0, 9, 1])}, "column indices"),
                      ({"acts": np.array([3, 1]), "allowed": np.ones((4, 2), np.uint8),
                        "actions": np.zeros(4, np.int64)}, "action indices"),
                      ({"allowed": np.zeros((4, O), np.uint8)}, "allow no action")):
        with pytest.raises(ValueError, match=match):
            actor(**kw)
    with pytest.raises(ValueError, match="one output"):
        net.critic_step(x, None, np.zeros(4, np.float32), 0.5, 1e-3)
    with pytest.raises(ValueError, match="share memory"):
        g = group()
        _core.NetStep(g, g, group(), group(), steps, 0.9, 0.999, 1e-5, 0.5)
    with pytest.raises(ValueError, match="float32"):
        _core.NetStep([a.astype(np.float64) for a in group()], group(), group(), group(), steps,
                      0.9, 0.999, 1e-5, 0.5)


def test_compiled_step_is_clean_under_asan_and_ubsan_and_equals_its_plain_twin(tmp_path):
    # csrc/tools/check_update.c: random networks (hidden widths 1-70, most padded), input and
    # action subsets, masks and minibatch sizes, every array exactly sized; each actor, critic
    # and distillation step under every register tiling this CPU runs, against the same step in
    # double precision written out plainly (loss, clipped gradients, parameters after Adam).
    # At -O0: its -O1 build alone costs more CPU than the -O0 build and its slower run together.
    from conftest import run_sanitized
    out = run_sanitized("check_update", tmp_path, [135, 7], extra_flags=["-fopenmp-simd"],
                        opt="-O0")
    assert "all invariants held: 135 steps" in out


def test_direct_fused_adam_step_equals_torch_adam_step():
    # _adam_step calls torch's fused Adam kernel itself, the first step too (on the state
    # _adam_first_state creates as torch would); after the same gradients, five steps in a row,
    # the weights and the state torch.optim.Adam keeps are the same to the last bit as
    # opt.step's.
    import torch
    cfg = PPOConfig(hidden=16)
    a, b = PPOLearner(cfg, seed=4), PPOLearner(cfg, seed=4)
    assert a.opt.param_groups[0]["fused"]
    gen = torch.Generator().manual_seed(0)
    for _i in range(5):
        for p, q in zip(a.model.parameters(), b.model.parameters()):
            g = torch.randn(p.shape, generator=gen)
            p.grad, q.grad = g.clone(), g.clone()
        a.opt.step()
        b._adam_step()
    np.testing.assert_array_equal(a.flat_weights(), b.flat_weights())
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            np.testing.assert_array_equal(a.opt.state[p][key].numpy(), b.opt.state[q][key].numpy())
    assert float(b.opt.state[next(b.model.parameters())]["step"]) == 5


@pytest.mark.parametrize("kw,stale", [({}, False), ({}, True), ({"minibatches": 7}, False),
                                      ({"mask": False, "memory": False}, False)])
def test_split_update_equals_the_one_thread_update_bit_for_bit(kw, stale, one_thread):
    # With the per-network clip the actor's steps run on this thread and the critic's on a second
    # one (_split_epochs); four updates in a row (the first, before Adam has state, on one thread)
    # give the one-thread path's weights, Adam state, statistics and shuffles to the last bit.
    import dataclasses
    cfg, batch = _recorded_batch(kw.get("mask", True))
    cfg = dataclasses.replace(cfg, clip_per_net=True, **kw)
    if not cfg.memory:
        batch.obs = np.ascontiguousarray(np.concatenate([batch.obs[:, :52], batch.obs[:, -25:]], 1))
        batch.masks = None
    split, one = PPOLearner(cfg, seed=9), PPOLearner(cfg, seed=9, split=False)
    calls, orig = [0], split._split_epochs

    def spy(*args):
        calls[0] += 1
        return orig(*args)
    split._split_epochs = spy
    for _ in range(4):
        assert split.update(batch, stale=stale) == one.update(batch, stale=stale)
    assert calls[0] == 3
    np.testing.assert_array_equal(split.flat_weights(), one.flat_weights())
    assert not np.array_equal(split.flat_weights(), PPOLearner(cfg, seed=9).flat_weights())
    for p, q in zip(split.model.parameters(), one.model.parameters()):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            np.testing.assert_array_equal(split.opt.state[p][key].numpy(),
                                          one.opt.state[q][key].numpy())
    assert split._gen.get_state().equal(one._gen.get_state())


def test_split_update_in_a_forked_child_of_a_process_that_ran_one(one_thread):
    # The critic's thread is started once per process; a child forked after the parent's split
    # update (multiprocessing's "fork", a fork of a test process) starts its own and gives the
    # parent's weights, where it once waited forever on the parent's thread.
    import dataclasses
    import multiprocessing as mp
    cfg, batch = _recorded_batch(True)
    cfg = dataclasses.replace(cfg, clip_per_net=True)
    lrn = PPOLearner(cfg, seed=9)
    for _ in range(2):
        lrn.update(batch)                    # the second one split, on the critic's thread
    after = PPOLearner(cfg, seed=9)
    for _ in range(3):
        after.update(batch)
    q = mp.get_context("fork").SimpleQueue()
    child = mp.get_context("fork").Process(target=lambda: (lrn.update(batch),
                                                           q.put(lrn.flat_weights())))
    child.start()
    child.join(60)
    if child.exitcode is None:
        child.kill()
        child.join()
    assert child.exitcode == 0, "the forked child's split update did not finish"
    np.testing.assert_array_equal(q.get(), after.flat_weights())


def test_split_update_only_where_the_networks_are_independent(one_thread):
    # The joint clip couples the two networks' steps, the KL stop ends both at the actor's word,
    # a per-step callback (--learner-threads > 1) needs one sequence of steps: one thread then.
    import dataclasses
    cfg, batch = _recorded_batch(True)
    for kw, between in (({"clip_per_net": False}, None),
                        ({"clip_per_net": True, "target_kl": 1.0}, None),
                        ({"clip_per_net": True}, lambda: None)):
        lrn = PPOLearner(dataclasses.replace(cfg, **kw), seed=9)
        lrn.update(batch)
        assert not lrn._split_ok(between)
    lrn = PPOLearner(dataclasses.replace(cfg, clip_per_net=True), seed=9)
    assert not lrn._split_ok(None)     # no Adam state before the first step
    lrn.update(batch)
    assert lrn._split_ok(None)
    torch.set_num_threads(2)       # multi-threaded operations: one sequence of steps
    assert not lrn._split_ok(None)
    assert not PPOLearner(dataclasses.replace(cfg, clip_per_net=True), seed=9, split=False).split


def test_split_update_error_waits_for_the_critic_thread(one_thread):
    # An error in the actor's steps leaves the update only after the critic's thread is done with
    # the shared buffers.
    import dataclasses
    import threading
    cfg, batch = _recorded_batch(True)
    lrn = PPOLearner(dataclasses.replace(cfg, clip_per_net=True), seed=9)
    lrn.update(batch)
    critic_done, orig = threading.Event(), lrn._critic_step
    calls = [0]

    def slow_critic(*args):
        calls[0] += 1
        got = orig(*args)
        if calls[0] == cfg.epochs * cfg.minibatches:     # the critic's last step
            critic_done.set()
        return got

    def broken_actor(*args):
        raise RuntimeError("actor failed")
    lrn._critic_step, lrn._actor_step = slow_critic, broken_actor
    with pytest.raises(RuntimeError, match="actor failed"):
        lrn.update(batch)
    assert critic_done.is_set() and calls[0] == cfg.epochs * cfg.minibatches


@pytest.mark.parametrize("stale", [False, True])
def test_an_update_prepared_ahead_equals_one_prepared_in_place(stale, one_thread):
    # Prepared (made by preparer() before the previous update, from a copy of the generator):
    # the same weights, Adam state, statistics and generator state as the learner that draws and
    # gathers in place, over updates on batches of two sizes; one prepared for the wrong place in
    # the generator's sequence (or for another batch size) does not fit and changes nothing.
    import dataclasses
    cfg, full = _recorded_batch(True)
    cfg = dataclasses.replace(cfg, clip_per_net=True, minibatches=3)
    part = Batch(**{k: (None if v is None else v[:700])
                    for k, v in dataclasses.asdict(full).items()})
    batches = [full, part, full, part, full]
    ahead, plain = PPOLearner(cfg, seed=5), PPOLearner(cfg, seed=5)
    used = []
    prepared = None
    for k, batch in enumerate(batches):
        nxt = None
        if k + 1 < len(batches):
            nxt = ahead.preparer(len(batch))     # made before this update, used by the next
        got = ahead.update(batch, stale=stale, prepared=prepared)
        assert got == plain.update(batch, stale=stale)
        if nxt is not None:
            prepared = nxt(batches[k + 1])
            used.append(prepared.fits(ahead, len(batches[k + 1])))
    assert used == [True] * 4
    np.testing.assert_array_equal(ahead.flat_weights(), plain.flat_weights())
    for p, q in zip(ahead.model.parameters(), plain.model.parameters()):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            np.testing.assert_array_equal(ahead.opt.state[p][key].numpy(),
                                          plain.opt.state[q][key].numpy())
    assert ahead._gen.get_state().equal(plain._gen.get_state())
    wrong = ahead.preparer(len(full))(full)      # for the update after the next one
    assert not wrong.fits(ahead, len(full)) and not wrong.fits(plain, len(full))
    assert ahead.preparer(0)(full).fits(ahead, len(full))   # (the next one's would)
    before = ahead.flat_weights()
    ahead.update(full, stale=stale, prepared=wrong)
    plain.update(full, stale=stale)
    np.testing.assert_array_equal(ahead.flat_weights(), plain.flat_weights())
    assert not np.array_equal(before, ahead.flat_weights())


def test_a_learner_never_imports_torch_dynamo():
    # torch's optimiser methods import torch._dynamo (1.9 s) on first use only to mark
    # themselves untraceable; the learner's Adam (wfrl.ppo.optim.EagerAdam) runs them without
    # that wrapper and makes the first Adam step itself: a learner's whole life — updates,
    # state, load_state — in a fresh interpreter leaves torch._dynamo unimported, and torch's
    # own classes unchanged.
    import subprocess
    import sys
    code = """
import sys
import torch
methods = dict(vars(torch.optim.Optimizer)), dict(vars(torch.optim.Adam))
import numpy as np
from wfrl.ppo.batch import Batch
from wfrl.ppo.learner import PPOConfig, PPOLearner
rng = np.random.default_rng(0)
n = 64
lrn = PPOLearner(PPOConfig(hidden=16, clip_per_net=True), seed=1)
batch = Batch(obs=rng.random((n, lrn.net.in_dim), dtype=np.float32),
              actions=rng.integers(0, 145, n).astype(np.int32),
              logprobs=np.full(n, -5.0, np.float32), values=np.zeros(n, np.float32),
              advantages=rng.standard_normal(n).astype(np.float32),
              returns=rng.standard_normal(n).astype(np.float32))
before = lrn.flat_weights()
for stale in (False, True, False):
    lrn.update(batch, stale=stale)
state = lrn.state()
PPOLearner(PPOConfig(hidden=16, clip_per_net=True), seed=2).load_state(state)
assert not np.array_equal(before, lrn.flat_weights())
assert (dict(vars(torch.optim.Optimizer)), dict(vars(torch.optim.Adam))) == methods
print("dynamo" if "torch._dynamo" in sys.modules else "no dynamo")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no dynamo"


def test_the_public_torch_path_gives_the_private_paths_numbers(monkeypatch, one_thread):
    # WFRL_TORCH_PUBLIC=1 (and any torch outside MEASURED_TORCH) steps with opt.step() and
    # torch.nn.utils.clip_grad_norm_ on torch.optim.Adam: the same weights, bit for bit, after
    # updates on fresh and stale batches
    import torch

    from wfrl.ppo import optim
    rng = np.random.default_rng(3)
    n = 96
    cfg = PPOConfig(hidden=16, clip_per_net=True)
    fast = PPOLearner(cfg, seed=6)
    monkeypatch.setenv("WFRL_TORCH_PUBLIC", "1")
    public = PPOLearner(cfg, seed=6)
    monkeypatch.delenv("WFRL_TORCH_PUBLIC")
    assert fast.private and not public.private
    assert type(fast.opt) is optim.EagerAdam and type(public.opt) is torch.optim.Adam
    for stale in (False, True, False, False):
        batch = Batch(obs=rng.random((n, fast.net.in_dim), dtype=np.float32),
                      actions=rng.integers(0, 145, n).astype(np.int32),
                      logprobs=np.full(n, -5.0, np.float32), values=np.zeros(n, np.float32),
                      advantages=rng.standard_normal(n).astype(np.float32),
                      returns=rng.standard_normal(n).astype(np.float32))
        fast.update(batch, stale=stale)
        public.update(batch, stale=stale)
        np.testing.assert_array_equal(fast.flat_weights(), public.flat_weights())
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    assert not optim.private_paths()


def test_the_compiled_step_switch_is_read_checked_and_recorded(monkeypatch):
    # WFRL_COMPILED_STEP: auto takes the compiled steps where the CPU has AVX-512; off never
    # (and forces the portable tiling: a machine with AVX-512 runs as one without); on always.
    # A bad value is one line and exit 2 before any work; a run's record names the path taken.
    import subprocess
    import sys

    from wfrl import _core
    from wfrl.config.run import compiled_step_setting
    from wfrl.errors import UserError
    from wfrl.ppo.learner import update_step_name
    assert [compiled_step_setting(v) for v in ("auto", " OFF ", "on", "")] == \
        ["auto", "off", "on", "auto"]
    with pytest.raises(UserError, match="WFRL_COMPILED_STEP must be one of auto, off, on"):
        compiled_step_setting("fast")
    probe = ("from wfrl.ppo.learner import COMPILED_FAST, update_step_name; "
             "from wfrl.config.run import PPOConfig; import wfrl._core as c; "
             "print(COMPILED_FAST, c.gemm_level(), update_step_name(PPOConfig(clip_per_net=True)))")
    fast = _core.cpu_tiling() == 2      # the CPU's, whatever this process forced
    want = {"off": "False 0 torch",
            "on": f"True {2 if fast else 0} compiled, {'avx512' if fast else 'portable'} tiling",
            "auto": (f"{fast} {2 if fast else 0} "
                     + ("compiled, avx512 tiling" if fast else "torch"))}
    for mode, line in want.items():
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env={**os.environ, "WFRL_COMPILED_STEP": mode}, check=True)
        assert res.stdout.strip() == line, mode
    res = subprocess.run([sys.executable, "-m", "wfrl", "train", "--workflow", "critical_first"],
                         capture_output=True, text=True,
                         env={**os.environ, "WFRL_COMPILED_STEP": "fast"})
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("wfrl: error: WFRL_COMPILED_STEP must be one of")
    import dataclasses
    assert update_step_name(dataclasses.replace(PPOConfig(), clip_per_net=False)) == "torch"
