"""The compiled rollout loop against its references: the C forward pass against torch, the C
compliance against workflow.ComplianceTracker, and whole compiled episodes against the plain
Python loop (numpy forward, Python xoshiro) — same actions, same buffer rows, same statistics."""
import numpy as np
import pytest
import torch
from wfrl._core import Actor, mlp_forward, mlp_n_params

from wfrl import rng
from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.collect.rollout import make_policy, run_episode_reference, run_episodes
from wfrl.envs import make_backend
from wfrl.ppo.netspec import n_params
from wfrl.ppo.policy import ActorCritic
from wfrl.rng import episode_seeds
from wfrl.workflow import ComplianceTracker, Workflow, all_workflows


def _model(hidden, seed=0, scale=0.3):
    torch.manual_seed(seed)
    m = ActorCritic(hidden)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * scale)
    return m


@pytest.mark.parametrize("hidden", [1, 7, 64, 256])
def test_c_forward_equals_torch(hidden):
    m = _model(hidden, hidden)
    w = m.flat_weights()
    assert mlp_n_params(hidden) == n_params(hidden) == len(w)
    rng = np.random.default_rng(hidden)
    sparse = (rng.random((100, 77)) < 0.15).astype(np.float32)
    dense = rng.normal(size=(100, 77)).astype(np.float32)
    for x in (sparse, dense):
        logits, values = mlp_forward(w, hidden, x)
        with torch.no_grad():
            lt, vt = m(torch.as_tensor(x))
        np.testing.assert_allclose(logits, lt.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(values, vt.numpy(), rtol=1e-5, atol=1e-5)


def _in_order_forward(w, hidden, x):
    """The C forward's arithmetic, spelled out: each layer's output starts at its bias and adds
    x[i]·W[:, i] for every nonzero input i in order — a float32 multiply, then a float32 add —
    and the hidden layers take the compiled tanh (_core.fastmath)."""
    from wfrl import _core
    from wfrl.ppo.netspec import layer_shapes
    shapes = layer_shapes(hidden, x.shape[0])
    layers, off = [], 0
    for out, inp in shapes:
        W = w[off:off + out * inp].reshape(out, inp)
        off += out * inp
        layers.append((W, w[off:off + out]))
        off += out

    def net(three, h):
        for k, (W, b) in enumerate(three):
            y = b.copy()
            for i in np.flatnonzero(h):
                y = y + h[i] * W[:, i]
            h = _core.fastmath(np.ascontiguousarray(y), "tanh") if k < 2 else y
        return h
    return net(layers[:3], x), net(layers[3:], x)[0]


@pytest.mark.parametrize("hidden", [1, 16, 64, 80, 150])
def test_c_forward_is_the_in_order_sum_bit_for_bit(hidden):
    """The compiled forward keeps blocks of 64 (then 16) outputs in vector registers and the rest
    as scalar sums; every path must give the bits of the plain in-order loop (widths that use
    each path: 145 logits = 2 blocks of 64 + 16 + 1; hidden 80 = 64 + 16; 150 = 128 + 16 + 6)."""
    m = _model(hidden, hidden + 1)
    w = m.flat_weights().astype(np.float32)
    rng = np.random.default_rng(hidden)
    x = (rng.random((6, 77)) < 0.3).astype(np.float32) * rng.normal(size=(6, 77)).astype(np.float32)
    x[0] = 0.0                    # no input at all: the biases
    x[1, :5] = -0.0               # negative zeros are zeros
    logits, values = mlp_forward(w, hidden, x)
    for r in range(len(x)):
        want_logits, want_value = _in_order_forward(w, hidden, x[r])
        assert np.array_equal(logits[r], want_logits.astype(np.float32))
        assert values[r] == np.float32(want_value)


def test_the_forward_without_the_value_gives_the_same_logits():
    """Acting greedily, or where the value is recorded nowhere, runs the actor alone (value
    NULL): the same logits to the bit as the whole forward pass."""
    m = _model(80, 81)
    w = m.flat_weights().astype(np.float32)
    rng = np.random.default_rng(5)
    x = (rng.random((40, 77)) < 0.3).astype(np.float32)
    logits, values = mlp_forward(w, 80, x)
    alone, none = mlp_forward(w, 80, x, value=False)
    assert none is None and np.array_equal(alone, logits) and np.isfinite(values).all()


def test_actors_acting_without_the_value_act_as_with_it():
    """actors_act (no value) and Actor.act (with it), sampling, on the same streams: the same
    actions, memory and compliance through whole episodes."""
    from wfrl._core import actors_act
    w = _model(16, 3, scale=0.5).flat_weights()
    rng = np.random.default_rng(8)
    for wf in all_workflows()[::40]:
        pol = make_policy(w, 16, wf, 1.0)
        one, many = Actor(pol), [Actor(pol)]
        for ep in range(3):
            one.begin(ep)
            many[0].begin(ep)
            for _ in range(100):
                ra = (rng.integers(0, 3, 13) * (rng.random(13) < 0.3)).astype(np.uint8)
                obs = (rng.random(52) < 0.1).astype(np.float32)
                a, _, value, _ = one.act(obs, ra)
                out = np.empty(1, np.int32)
                actors_act(many, obs[None], ra, out)
                assert out[0] == a and np.isfinite(value)
            assert (one.fixes, one.compliant) == (many[0].fixes, many[0].compliant)


def test_c_forward_rejects_bad_weights():
    with pytest.raises(ValueError, match="weights must have 27794 floats for hidden=64"):
        mlp_forward(np.zeros(10, np.float32), 64, np.zeros((1, 77), np.float32))
    with pytest.raises(ValueError, match="weights must have 27794 floats for hidden=64"):
        make_policy(np.zeros(10, np.float32), 64, Workflow.parse("balanced"), 1.0)


def test_c_compliance_equals_reference():
    rng = np.random.default_rng(3)
    w = _model(8).flat_weights()
    for wf in all_workflows()[::13]:
        for foothold in (False, True):
            lam = float(rng.uniform(0.1, 3))
            actor = Actor(make_policy(w, 8, wf, lam, foothold))
            actor.begin(1)
            ref = ComplianceTracker(wf, lam, foothold)
            # Drive both with the same (action, red_access) pairs: the actor's own actions.
            for _ in range(300):
                ra = rng.integers(0, 3, 13).astype(np.uint8) * (rng.random(13) < 0.3)
                ra[8] = 2
                obs = (rng.random(52) < 0.1).astype(np.float32)
                a, _, _, bonus = actor.act(obs, ra.astype(np.uint8))
                assert bonus == pytest.approx(ref.step(a, ra), abs=1e-6)
            assert (actor.fixes, actor.compliant) == (ref.fixes, ref.compliant)
            assert actor.compliance == pytest.approx(ref.rate)
            assert actor.finish() == pytest.approx(ref.finish())


def _compare_rollouts(backend_name, red, episodes, greedy=False):
    m = _model(64, 1, scale=0.2)
    w = m.flat_weights()
    wf = Workflow.parse("critical_first")
    be = make_backend(backend_name, red)
    buf_c = compiled_buffer(allocate_trajectory(len(episodes), 100))
    buf_r = compiled_buffer(allocate_trajectory(len(episodes), 100))
    stats = run_episodes(be, make_policy(w, 64, wf, 2.0, greedy=greedy), episodes, 11, buf_c)
    env_seeds, act_seeds = episode_seeds(11, episodes)
    for k in range(len(episodes)):
        ref, _ = run_episode_reference(be, w, 64, wf, 2.0, int(env_seeds[k]), int(act_seeds[k]),
                                       greedy=greedy, buffer=buf_r, row=k)
        assert stats[k].fixes == ref.fixes and stats[k].compliant_fixes == ref.compliant_fixes
        assert stats[k].env_return == pytest.approx(ref.env_return, abs=1e-3)
        assert stats[k].alignment == pytest.approx(ref.alignment, abs=1e-5)
    a, b = buf_c.arrays, buf_r.arrays
    for name in ("actions", "dones", "red_access", "lengths", "obs"):
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for name in ("logprobs", "values", "rewards"):
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_no_first_fix_bonus_on_the_compiled_buffer_equals_the_plain_loop_without_it():
    """--no-first-fix-bonus is applied by the learner to the compiled loop's rewards (the rule
    with the bonus): the result equals the plain loop run without the bonus, and differs from
    the compiled rewards exactly at each episode's first fix, by −λ/2."""
    from wfrl.ppo.batch import with_first_fix_bonus
    from wfrl.workflow import FIRST_FIX_BONUS, fix_target
    lam, episodes = 2.0, list(range(10, 30))
    w = _model(64, 1, scale=0.2).flat_weights()
    wf = Workflow.parse("critical_first")
    be = make_backend("sim", "RedMeanderAgent")
    buf_c = compiled_buffer(allocate_trajectory(len(episodes), 100))
    buf_r = compiled_buffer(allocate_trajectory(len(episodes), 100))
    run_episodes(be, make_policy(w, 64, wf, lam), episodes, 11, buf_c)
    env_seeds, act_seeds = episode_seeds(11, episodes)
    for k in range(len(episodes)):
        run_episode_reference(be, w, 64, wf, lam, int(env_seeds[k]), int(act_seeds[k]),
                              buffer=buf_r, row=k, first_fix_bonus=False)
    a, b = buf_c.arrays, buf_r.arrays
    np.testing.assert_array_equal(a["actions"], b["actions"])
    shifted = with_first_fix_bonus(a["rewards"], a["actions"], a["lengths"],
                                   -FIRST_FIX_BONUS * lam)
    np.testing.assert_allclose(shifted, b["rewards"], rtol=1e-5, atol=1e-5)
    firsts = 0
    for k in range(len(episodes)):
        fixes = [t for t in range(int(a["lengths"][k])) if fix_target(int(a["actions"][k, t])) >= 0]
        diff = shifted[k] - a["rewards"][k]
        if fixes:
            firsts += 1
            assert diff[fixes[0]] == pytest.approx(-FIRST_FIX_BONUS * lam)
            diff[fixes[0]] = 0.0
        assert not diff.any()
    assert firsts >= len(episodes) // 2          # most episodes fix something


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
@pytest.mark.parametrize("greedy", [False, True])
def test_compiled_sim_rollout_equals_reference(red, greedy):
    _compare_rollouts("sim", red, list(range(40, 70)), greedy)


@pytest.mark.cyborg
def test_compiled_actor_on_cyborg_equals_reference():
    _compare_rollouts("cyborg", "RedMeanderAgent", [0, 1, 2])


def test_episodes_depend_only_on_seed_and_index():
    w = _model(16).flat_weights()
    pol = make_policy(w, 16, Workflow.parse("balanced"), 1.0)
    be = make_backend("sim", "RedMeanderAgent")
    one = run_episodes(be, pol, [5, 6, 7], 3)
    other = run_episodes(be, pol, [7, 6], 3)
    assert one[2].env_return == other[0].env_return and one[1].fixes == other[1].fixes
    assert run_episodes(be, pol, [5], 4)[0].env_return != one[0].env_return or \
        run_episodes(be, pol, [5], 4)[0].fixes != one[0].fixes


def test_reserved_episode_ranges_keep_their_numbers():
    """Evaluations draw their episodes (hence seeds) from fixed reserved ranges: the numbers are
    pinned, since every recorded evaluation depends on them, and the ranges do not overlap."""
    assert (rng.EVAL_EPISODE_BASE, rng.SELECT_EPISODE_BASE, rng.CAGE2_EPISODE_BASE) == \
        (1_000_000_000, 2_000_000_000, 3_000_000_000)
    assert rng.episode_block(rng.EVAL_EPISODE_BASE, 3) == 1_003_000_000
    assert rng.episode_block(rng.CAGE2_EPISODE_BASE, 8) + rng.EPISODE_BLOCK < 4_000_000_000
    assert (rng.learner_seed(3), rng.learner_seed(3, 2)) == (300_009, 300_011)
