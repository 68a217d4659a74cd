"""Learning with what the simulator knows (wfrl.ppo.privileged): the privileged critic's GAE and
the teacher's distribution against plain twins, the batch carrying what they read, the policy
they train playing exactly as any other, the bad combinations refused in one line, and runs
that repeat exactly."""
import csv
import json

import numpy as np
import pytest
import torch
from _helpers import run_wfrl, train_tiny

from wfrl.collect.base import make_collector
from wfrl.config.run import PPOConfig
from wfrl.features import TRUTH_DIM, truth_features
from wfrl.ppo.batch import reference_memory_rows, to_batch
from wfrl.ppo.gae import gae_reference
from wfrl.ppo.netspec import NetSpec, NumpyPolicy
from wfrl.ppo.policy import ActorCritic
from wfrl.ppo.privileged import PrivilegedCritic, Teacher, privileged_gae
from wfrl.workflow import Workflow


def _collected(n_rows=6, net=NetSpec(32, True, True)):
    wf = Workflow.parse("critical_first")
    torch.manual_seed(0)
    weights = ActorCritic(net.hidden, net.in_dim).flat_weights()
    c = make_collector("sequential", "sim", "mixed", net, 3, 30.0, False, 1, n_rows)
    try:
        c.collect(weights, 1, wf, 0, n_rows)
        return c.buffer, np.tile(wf.onehot(), (n_rows, 1)), net
    except BaseException:
        c.close()
        raise


def test_privileged_gae_equals_the_plain_loop_over_rows():
    rng = np.random.default_rng(4)
    lengths = np.array([5, 3, 0, 4], np.int32)
    n = int(lengths.sum())
    values, rewards = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    adv, ret = privileged_gae(values, rewards, lengths, 0.9, 0.8)
    T = 5
    v_rows, r_rows = np.zeros((4, T), np.float32), np.zeros((4, T), np.float32)
    dones = np.zeros((4, T), np.uint8)
    k = 0
    for r, n_r in enumerate(lengths):
        v_rows[r, :n_r], r_rows[r, :n_r] = values[k:k + n_r], rewards[k:k + n_r]
        if n_r:
            dones[r, n_r - 1] = 1
        k += n_r
    a_ref, r_ref = gae_reference(r_rows, v_rows, dones, lengths, np.zeros(4), 0.9, 0.8)
    valid = np.arange(T)[None, :] < lengths[:, None]
    np.testing.assert_allclose(adv, a_ref[valid], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ret, r_ref[valid], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("compiled", [False, True])
def test_teacher_distribution_equals_the_numpy_policy_row_by_row(compiled, tiling):
    # compiled: NetStep.probs (csrc/wfrl_update.h wfrl_net_probs) in chunks of 3 rows, a row
    # allowing nothing (uniform) among them; the reference is the per-step numpy policy
    net = NetSpec(16, memory=True, mask=True, truth_input=True)
    torch.manual_seed(2)
    flat = ActorCritic(net.hidden, net.in_dim).flat_weights()
    rng = np.random.default_rng(1)
    x = rng.random((8, net.in_dim), dtype=np.float32)
    allowed = rng.random((8, 145)) < 0.6
    allowed[:, 0] = True
    allowed[5] = False
    teacher = Teacher(flat, net, compiled=compiled)
    teacher.CHUNK = 3
    got = teacher.probs(x, allowed)
    assert got.dtype == np.float32 and got.shape == (8, 145)
    ref = NumpyPolicy(flat, net.hidden, net.in_dim)
    for i in range(8):
        logits, _ = ref.forward(x[i])
        z = np.where(allowed[i], logits, -1e9)
        p = np.exp(z - z.max())
        np.testing.assert_allclose(got[i], p / p.sum(), rtol=1e-5, atol=1e-7)
    assert np.all(got[~allowed & allowed.any(1, keepdims=True)] == 0)
    np.testing.assert_allclose(got[5], 1 / 145, rtol=1e-6)
    unmasked = teacher.probs(x, None)
    np.testing.assert_allclose(unmasked.sum(1), 1, rtol=1e-5)
    assert (unmasked > 0).all()


def test_the_batch_carries_truth_rewards_and_teacher_labels():
    buffer, cond, net = _collected()
    a = buffer.arrays
    t_net = NetSpec(16, memory=True, mask=True, truth_input=True)
    torch.manual_seed(3)
    teacher = Teacher(ActorCritic(t_net.hidden, t_net.in_dim).flat_weights(), t_net)
    plain = to_batch(buffer, cond, 0.99, 0.95, net)
    b = to_batch(buffer, cond, 0.99, 0.95, net, privileged=True, teacher=teacher)
    valid = np.arange(a["rewards"].shape[1])[None, :] < a["lengths"][:, None]
    np.testing.assert_array_equal(b.truth, truth_features(a["red_access"][valid]))
    np.testing.assert_array_equal(b.rewards, a["rewards"][valid])
    # the policy's own batch is untouched by what rides along
    for f in ("obs", "actions", "logprobs", "values", "advantages", "returns", "masks"):
        np.testing.assert_array_equal(getattr(b, f), getattr(plain, f))
    # the teacher reads observation ⊕ memory ⊕ truth ⊕ workflow, masked by its own mask
    feats, allowed = reference_memory_rows(a["obs"], a["actions"], a["lengths"])
    x = np.concatenate((a["obs"][valid], feats, b.truth, cond[np.nonzero(valid)[0]]), axis=1)
    np.testing.assert_allclose(b.teacher_probs, teacher.probs(x, allowed.view(bool)), atol=1e-7)
    assert b.truth.shape[1] == TRUTH_DIM


def test_relabel_uses_the_critics_values():
    buffer, cond, net = _collected()
    b = to_batch(buffer, cond, 0.99, 0.95, net, privileged=True)
    critic = PrivilegedCritic(net.in_dim, 16, 1e-3, 0)
    out = critic.relabel(b, 0.99, 0.95)
    with torch.no_grad():
        v = critic.net(torch.from_numpy(np.concatenate((b.obs, b.truth), 1))).squeeze(-1).numpy()
    np.testing.assert_allclose(out.values, v, rtol=1e-6)
    adv, ret = privileged_gae(v, b.rewards, b.lengths, 0.99, 0.95)
    np.testing.assert_allclose(out.advantages, adv, rtol=1e-6)
    np.testing.assert_allclose(out.returns, ret, rtol=1e-6)
    assert not np.allclose(out.advantages, b.advantages)   # not the rollout's values any more
    before = critic.fit(out, 2, 2, 1e-2, 0.5)
    assert critic.fit(out, 2, 2, 1e-2, 0.5) < before       # it learns the returns


def test_compiled_fit_equals_the_torch_twin(tiling):
    """The privileged critic's compiled minibatch steps (the learner's NetStep.critic_step)
    against its torch steps from the same start: the same losses and weights up to rounding."""
    buffer, cond, net = _collected()
    b = to_batch(buffer, cond, 0.99, 0.95, net, privileged=True)
    fits = []
    for compiled in (True, False):
        torch.manual_seed(7)
        c = PrivilegedCritic(net.in_dim, 16, 1e-3, 0, 0.5, compiled=compiled)
        out = c.relabel(b, 0.99, 0.95)
        losses = [c.fit(out, 2, 3, 3e-3, 0.5) for _ in range(3)]
        fits.append((losses, [p.detach().clone() for p in c.net.parameters()]))
    (l_c, w_c), (l_t, w_t) = fits
    np.testing.assert_allclose(l_c, l_t, rtol=1e-4)
    for a, b_ in zip(w_c, w_t):
        np.testing.assert_allclose(a.numpy(), b_.numpy(), rtol=1e-3, atol=1e-5)
    assert not torch.equal(w_c[0], PrivilegedCritic(net.in_dim, 16, 1e-3, 0).net[0].weight)


@pytest.fixture(scope="module")
def teacher_ckpt(tmp_path_factory):
    """A (tiny) full-information policy of the installed code."""
    return train_tiny(tmp_path_factory.mktemp("teacher") / "t", "--truth-input", "--memory",
                      "--mask", "--seed", "3") / "checkpoint.pt"


def _log(run):
    with open(run / "training_log.csv") as f:
        rows = list(csv.DictReader(f))
    timing = {"Collection_Time", "Update_Time", "Episodes_Per_Second"}
    return [{k: v for k, v in r.items() if k not in timing} for r in rows]


@pytest.mark.slow
def test_a_privileged_run_repeats_exactly_and_plays_like_any_policy(tmp_path, teacher_ckpt):
    flags = ("--memory", "--mask", "--seed", "5", "--privileged-critic", "--teacher",
             teacher_ckpt)
    a, b = train_tiny(tmp_path / "a", *flags), train_tiny(tmp_path / "b", *flags)
    assert _log(a) == _log(b)
    plain = train_tiny(tmp_path / "plain", "--memory", "--mask", "--seed", "5")
    assert _log(a) != _log(plain)            # the routes change the learning
    ck = torch.load(a / "checkpoint.pt", weights_only=True)
    assert ck["net"]["truth_input"] is False and "privileged_critic" in ck
    assert ck["config"]["ppo"]["teacher"] == str(teacher_ckpt)
    # the actor alone: evaluated like any checkpoint, as a CAGE2 agent too
    res = run_wfrl("eval", "--checkpoint", a / "checkpoint.pt", "--episodes", 3, "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["policy"] == "greedy" and out["n"] == 3
    import wfrl
    agent = wfrl.load_agent(str(a / "checkpoint.pt"))
    assert 0 <= agent.get_action(np.zeros(52, np.int64), 145) < 145


def test_bad_combinations_are_one_line(tmp_path, teacher_ckpt):
    base = ("train", "--workflow", "critical_first", "--total-episodes", 20, "--out",
            tmp_path / "x")
    cases = [
        (("--teacher", "pretrained:critical_first"), "not a full-information policy"),
        (("--privileged-critic", "--backend", "cyborg"), "--backend sim"),
        (("--teacher", teacher_ckpt, "--backend", "sim:leaderboard"), "the other CybORG code"),
        (("--privileged-critic", "--truth-input"), "without the truth input"),
        (("--teacher", tmp_path / "missing.pt"), "missing.pt"),
        (("--teacher", "pretrained:bound", "--backend", "sim:leaderboard"),
         "the other CybORG code"),
    ]
    for flags, words in cases:
        res = run_wfrl(*base, *flags)
        assert res.returncode == 2, (flags, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (flags, res.stderr)
        assert not (tmp_path / "x").exists(), flags     # refused before anything is written
    res = run_wfrl("train", "--teacher", teacher_ckpt, "--out", tmp_path / "s")
    assert res.returncode == 2 and "give --workflow" in res.stderr


def test_settings_round_trip_and_older_runs_default_off():
    cfg = PPOConfig(privileged_critic=True, teacher="t.pt", teacher_alpha=0.0)
    assert PPOConfig.from_dict(cfg.to_dict()) == cfg
    from wfrl.config.run import with_older_runs_ppo
    old = with_older_runs_ppo({})
    assert old["privileged_critic"] is False and old["teacher"] is None


def _teacher_batch():
    buffer, cond, net = _collected()
    t_net = NetSpec(16, memory=True, mask=True, truth_input=True)
    torch.manual_seed(3)
    teacher = Teacher(ActorCritic(t_net.hidden, t_net.in_dim).flat_weights(), t_net)
    return to_batch(buffer, cond, 0.99, 0.95, net, teacher=teacher), net


@pytest.mark.parametrize("compiled", [False, True])
def test_the_teachers_pass_takes_the_steps_asked_for(compiled, tiling):
    b, net = _teacher_batch()
    from wfrl.ppo.privileged import Distiller
    for steps, expect in ((None, 4), (4, 4), (1, 1)):
        torch.manual_seed(0)
        model = ActorCritic(net.hidden, net.in_dim)
        d = Distiller(model, net.in_dim, 16, 1e-3, 0, 1.0, 0.7, 4.0, compiled=compiled)
        before = [p.detach().clone() for p in model.actor.parameters()]
        out = d.step(b, 0.0, 4, 1e-3, steps)
        took = (d._student.adam["steps"][0] if compiled else
                d.opt.state[next(model.actor.parameters())]["step"])
        assert took == expect
        assert 0 < out["teacher_weight"] <= 1 and out["teacher_coef"] == 1.0
        assert any(not torch.equal(a, p) for a, p in zip(before, model.actor.parameters()))
        assert d.step(b, 0.7, 4, 1e-3, steps) == {}     # annealed away: nothing done


@pytest.mark.parametrize("alpha", [4.0, 0.0])
def test_compiled_teachers_pass_equals_the_torch_twin(alpha, tiling):
    """The distillation's compiled minibatch steps (NetStep.kl_step: the head's, then the
    student's weighted by the head's KL) against its torch steps from the same start, three
    passes: the same KL, weights and parameters of the student and the head up to rounding."""
    b, net = _teacher_batch()
    from wfrl.ppo.privileged import Distiller
    runs = []
    for compiled in (True, False):
        torch.manual_seed(0)
        model = ActorCritic(net.hidden, net.in_dim)
        d = Distiller(model, net.in_dim, 16, 3e-3, 0, 1.0, 0.7, alpha, compiled=compiled)
        outs = [d.step(b, 0.1 * k, 3, 3e-3) for k in range(3)]
        runs.append((outs, [p.detach().clone() for p in model.actor.parameters()],
                     [p.detach().clone() for p in d.aux.parameters()]))
    (o_c, s_c, a_c), (o_t, s_t, a_t) = runs
    for oc, ot in zip(o_c, o_t):
        assert oc.keys() == ot.keys()
        for k in oc:
            assert oc[k] == pytest.approx(ot[k], rel=1e-4, abs=1e-6), k
    assert o_c[0]["teacher_weight"] < 1.0 if alpha else o_c[0]["teacher_weight"] == 1.0
    for a, b_ in zip(s_c + a_c, s_t + a_t):
        np.testing.assert_allclose(a.numpy(), b_.numpy(), rtol=1e-3, atol=1e-5)
    torch.manual_seed(0)
    start = [p.detach().clone() for p in ActorCritic(net.hidden, net.in_dim).actor.parameters()]
    assert not all(torch.equal(a, p) for a, p in zip(start, s_c))    # the student moved


def test_the_teachers_weight_falls_linearly_to_its_floor():
    from wfrl.ppo.privileged import Distiller
    model = ActorCritic(16, 8)
    d = Distiller(model, 8, 16, 1e-3, 0, 1.0, 0.5, 4.0, floor=0.2)
    assert [round(d.weight(f), 6) for f in (0.0, 0.25, 0.5, 0.75, 1.0)] == [1.0, 0.6, 0.2, 0.2, 0.2]
    assert Distiller(model, 8, 16, 1e-3, 0, 1.0, 0.5, 4.0).weight(0.6) == 0.0
    assert Distiller(model, 8, 16, 1e-3, 0, 1.0, 0.0, 4.0, floor=0.1).weight(0.0) == 0.1


def test_a_privileged_update_is_the_same_prepared_ahead_split_or_on_one_thread(one_thread):
    # The privileged critic relabels the batch when the update starts; a preparation made ahead
    # keeps its gathered rows and takes the new targets (Prepared.with_targets), and the critic's
    # fit runs on the critic's thread beside the actor's steps. Neither changes a number: the
    # learner given preparations, the one preparing in place and the one-thread learner end
    # with the same statistics, weights and privileged critic, bit for bit.
    import threading

    from wfrl.ppo.learner import PPOLearner
    cfg = PPOConfig(hidden=32, memory=True, mask=True, clip_per_net=True, minibatches=3,
                    privileged_critic=True)
    buffer, cond, net = _collected(12, cfg.net())
    b = to_batch(buffer, cond, cfg.gamma, cfg.gae_lambda, net, privileged=True)
    ahead, plain = PPOLearner(cfg, seed=5), PPOLearner(cfg, seed=5)
    one = PPOLearner(cfg, seed=5, split=False)
    threads, fit = [], ahead.privileged.fit

    def spy(*args, **kw):
        threads.append(threading.current_thread().name)
        return fit(*args, **kw)
    ahead.privileged.fit = spy
    prepared, used = None, []
    for _ in range(3):
        nxt = ahead.preparer(len(b))
        used.append(prepared is not None and prepared.fits(ahead, len(b)))
        got = ahead.update(b, prepared=prepared)
        assert got == plain.update(b) == one.update(b)
        prepared = nxt(b)
    assert used == [False, True, True]
    assert threads[0] == threading.current_thread().name       # the first update: one thread
    assert all(t.startswith("wfrl-critic") for t in threads[1:])
    for lrn in (plain, one):
        np.testing.assert_array_equal(ahead.flat_weights(), lrn.flat_weights())
        for p, q in zip(ahead.privileged.net.parameters(), lrn.privileged.net.parameters()):
            assert torch.equal(p, q)
