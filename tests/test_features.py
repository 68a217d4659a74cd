"""The defender's memory block and action mask: the compiled memory (csrc/wfrl_memory.h, inside
the rollout loop) against its Python twins (wfrl.features: the step-by-step MemoryTracker and the
vectorised memory_and_masks the learner uses), on episodes of both backends; what the mask
allows; the mixed red's per-episode choice on both backends."""
import numpy as np
import pytest
import torch
import wfrl._core as core

from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.collect.rollout import make_policy, run_episode_reference, run_episodes
from wfrl.envs import make_backend
from wfrl.envs.actions import DECOY_KINDS, MONITOR
from wfrl.envs.base import mixed_red_kind
from wfrl.features import DECOY_USEFUL, MASKED_LOGIT, MEM_DIM, MemoryTracker, decoy_action, memory_and_masks
from wfrl.ppo.batch import to_batch
from wfrl.ppo.netspec import NetSpec
from wfrl.ppo.policy import ActorCritic
from wfrl.rng import episode_seeds
from wfrl.workflow import Workflow

NET = NetSpec(hidden=32, memory=True, mask=True)
WF = Workflow.parse("critical_first")


def _weights(net=NET, seed=0, scale=0.4):
    """Perturbed weights whose policy tries many actions (decoys, restores, removes)."""
    torch.manual_seed(seed)
    m = ActorCritic(net.hidden, net.in_dim)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * scale)
    return m


def _collect(backend_name, red, n, seed, net=NET, m=None):
    m = m or _weights(net)
    backend = make_backend(backend_name, red)
    buf = compiled_buffer(allocate_trajectory(n, 100))
    stats = run_episodes(backend, make_policy(m.flat_weights(), net, WF, 30.0), range(n), seed, buf)
    backend.close()
    return m, buf, stats


def _tracker_trace(obs, actions):
    mt = MemoryTracker()
    feats, masks = [], []
    for o, a in zip(obs, actions):
        mt.update(o)
        feats.append(mt.features())
        masks.append(mt.mask())
        mt.acted(int(a))
    return np.array(feats), np.array(masks)


def _check_rows(buf, rows):
    a = buf.arrays
    vec_f, vec_m = memory_and_masks(a["obs"][rows], a["actions"][rows])
    for i, r in enumerate(rows):
        n = int(a["lengths"][r])
        c_f, c_m = core.memory_trace(a["obs"][r, :n], a["actions"][r, :n])
        t_f, t_m = _tracker_trace(a["obs"][r, :n], a["actions"][r, :n])
        np.testing.assert_array_equal(c_f, t_f)
        np.testing.assert_array_equal(c_f, vec_f[i, :n])
        np.testing.assert_array_equal(c_m.astype(bool), t_m)
        np.testing.assert_array_equal(c_m.astype(bool), vec_m[i, :n])
        # the compiled loop never chose an action its mask forbids
        assert c_m[np.arange(n), a["actions"][r, :n]].all()


def _check_logprobs(m, buf, net=NET):
    """The learner's batch (memory and masks rebuilt by the twin) gives the log-probabilities and
    values the compiled loop computed while acting: the C side used the same features."""
    n_rows = buf.arrays["obs"].shape[0]
    batch = to_batch(buf, np.tile(WF.onehot(), (n_rows, 1)), 0.99, 0.95, net)
    assert batch.obs.shape[1] == net.in_dim
    with torch.no_grad():
        logits, values = m(torch.as_tensor(batch.obs))
        if batch.masks is not None:
            logits = logits.masked_fill(~torch.as_tensor(batch.masks), MASKED_LOGIT)
        logp = torch.log_softmax(logits, -1).gather(
            1, torch.as_tensor(batch.actions, dtype=torch.int64)[:, None])[:, 0]
    np.testing.assert_allclose(logp.numpy(), batch.logprobs, atol=2e-4)
    np.testing.assert_allclose(values.numpy(), batch.values, atol=2e-4)


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent", "mixed"])
def test_memory_and_mask_equal_their_twins_sim(red):
    m, buf, stats = _collect("sim", red, 60, seed=11)
    acts = buf.arrays["actions"]
    decoys = (acts >= 28) & (acts < 132)
    assert decoys.any() and ((acts >= 132).any()), "the policy should try decoys and restores"
    _check_rows(buf, list(range(60)))
    _check_logprobs(m, buf)


@pytest.mark.cyborg
def test_memory_and_mask_equal_their_twins_cyborg():
    m, buf, _ = _collect("cyborg", "B_lineAgent", 3, seed=5)
    _check_rows(buf, [0, 1, 2])
    _check_logprobs(m, buf)


@pytest.mark.parametrize("net", [NetSpec(32, True, False), NetSpec(32, False, True)])
def test_each_feature_alone(net):
    m, buf, _ = _collect("sim", "B_lineAgent", 20, seed=3, net=net, m=_weights(net, seed=2))
    _check_logprobs(m, buf, net)


def test_compiled_episode_equals_python_reference_with_memory():
    m = _weights(seed=4)
    w = m.flat_weights()
    for k, (es, ac) in enumerate(zip(*episode_seeds(9, range(4)))):
        buf = compiled_buffer(allocate_trajectory(1, 100))
        st = run_episodes(make_backend("sim", "RedMeanderAgent"), make_policy(w, NET, WF, 30.0),
                          [k], 9, buf)[0]
        ref, actions = run_episode_reference(make_backend("sim", "RedMeanderAgent"), w, NET, WF,
                                             30.0, int(es), int(ac))
        np.testing.assert_array_equal(buf.arrays["actions"][0], actions)
        assert st.env_return == pytest.approx(ref.env_return, abs=1e-3)


def test_memory_features_by_hand():
    mt = MemoryTracker()
    obs = np.zeros(52, np.float32)
    obs[4 * 9 + 0] = 1           # Scan on User1
    mt.update(obs)
    f = mt.features()
    assert f.shape == (MEM_DIM,) and f[9] == 1 and f[13 + 9] == 1 and f[-1] == 0
    mt.acted(132 + 7)            # Restore(Op_Server0)
    obs2 = np.zeros(52, np.float32)
    obs2[4 * 2 + 0] = obs2[4 * 2 + 1] = 1   # Exploit on Enterprise1
    mt.update(obs2)
    f = mt.features()
    assert f[9] == 1 and f[13 + 9] == 1          # scan history kept, last scan unchanged
    assert f[26 + 2] == 1 and f[39 + 7] == 1      # compromise seen, restore remembered
    assert f[-1] == pytest.approx(0.01)


def test_mask_by_hand():
    mt = MemoryTracker()
    mt.update(np.zeros(52, np.float32))
    allowed = mt.mask()
    assert not allowed[MONITOR] and allowed[0] and allowed[132:].all() and allowed[2:28].all()
    assert allowed[28:132].sum() == sum(bin(u).count("1") for u in DECOY_USEFUL)
    apache, vsftpd, femitter = (DECOY_KINDS.index(k) for k in ("Apache", "Vsftpd", "Femitter"))
    assert not allowed[decoy_action(apache, 2)]       # Enterprise1's tomcat holds port 80
    assert allowed[decoy_action(femitter, 2)] and not allowed[decoy_action(femitter, 1)]
    assert not allowed[decoy_action(vsftpd, 11)]      # User3's real web server answers first
    mt.acted(decoy_action(apache, 7))                 # Apache on Op_Server0
    mt.update(np.zeros(52, np.float32))
    allowed = mt.mask()
    assert not allowed[decoy_action(apache, 7)] and not allowed[decoy_action(vsftpd, 7)]
    assert mt.features()[52 + 7] == pytest.approx(0.25)
    mt.acted(132 + 7)                                 # Restore(Op_Server0) removes its decoys
    mt.update(np.zeros(52, np.float32))
    assert mt.mask()[decoy_action(apache, 7)] and mt.features()[52 + 7] == 0


def test_mixed_red_kind_twins_and_backends():
    env_seeds, _ = episode_seeds(4, range(400))
    kinds = [core.mixed_red_kind(int(s)) for s in env_seeds]
    names = [mixed_red_kind(int(s)) for s in env_seeds]
    assert [("B_lineAgent", "RedMeanderAgent")[k] for k in kinds] == names
    assert 0.4 < np.mean(kinds) < 0.6
    # a sleeping blue against the mixed red: the simulator plays each episode's own attacker
    mixed = make_backend("sim", "mixed")
    for s, name in list(zip(env_seeds, names))[:12]:
        single = make_backend("sim", name)
        for b in (mixed, single):
            b.seed(int(s))
            b.reset()
        a = [mixed.step(0)[1] for _ in range(40)]
        b_ = [single.step(0)[1] for _ in range(40)]
        assert a == b_


@pytest.mark.cyborg
def test_mixed_red_on_cyborg_follows_the_seed():
    env_seeds, _ = episode_seeds(4, range(6))
    b = make_backend("cyborg", "mixed")
    try:
        for s in env_seeds:
            b.seed(int(s))
            assert b.current_red == mixed_red_kind(int(s))
    finally:
        b.close()


@pytest.mark.parametrize("name", ["sync", "async"])
def test_parallel_collectors_carry_the_memory_network(name):
    """Workers build the same memory-and-mask policy from the published weights: their rows
    equal the sequential collector's."""
    from wfrl.collect.base import make_collector
    w = _weights(seed=6).flat_weights()
    rows = {}
    for cname in ("sequential", name):
        c = make_collector(cname, "sim", "mixed", NET, 5, 30.0, False, 2, 24)
        try:
            stats = c.collect(w, 1, WF, 40, 24)
            a = c.buffer.arrays
            rows[cname] = ([s.env_return for s in stats], a["actions"].copy(), a["logprobs"].copy())
        finally:
            c.close()
    assert rows["sequential"][0] == rows[name][0]
    np.testing.assert_array_equal(rows["sequential"][1], rows[name][1])
    np.testing.assert_array_equal(rows["sequential"][2], rows[name][2])


def test_memory_rows_equals_its_python_twin_on_recorded_buffers():
    # The learner's batch builds the memory block and masks with the compiled memory_rows; its
    # plain-Python twin is memory_and_masks over the valid steps. Recorded episodes of both reds,
    # rows of different lengths (partially filled buffer), and an empty row in the middle.
    from wfrl._core import memory_rows

    from wfrl.collect.base import make_collector
    from wfrl.ppo.batch import reference_memory_rows
    from wfrl.ppo.netspec import NetSpec
    from wfrl.workflow import Workflow
    net = NetSpec(hidden=16, memory=True, mask=True)
    rng = np.random.default_rng(4)
    col = make_collector("sequential", "sim", "mixed", net, 4, 30.0, False, 1, 9)
    try:
        weights = (rng.standard_normal(net.n_params) * 0.3).astype(np.float32)
        col.collect(weights, 0, Workflow.parse("balanced"), 40, 9)
        a = {k: v.copy() for k, v in col.buffer.arrays.items()}
    finally:
        col.close()
    a["lengths"][2] = 0
    a["lengths"][5] = 37
    for memory, mask in ((True, True), (True, False), (False, True)):
        got = memory_rows(a["obs"], a["actions"], a["lengths"], memory, mask)
        want = reference_memory_rows(a["obs"], a["actions"], a["lengths"], memory, mask)
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if g is not None:
                assert len(g) == a["lengths"].sum()
                np.testing.assert_array_equal(g, w)
    assert len(np.unique(a["actions"][0][:100])) > 5      # the episodes really vary
    with pytest.raises(ValueError, match="memory_rows: action 145 out of range"):
        bad = a["actions"].copy()
        bad[0, 0] = 145
        memory_rows(a["obs"], bad, a["lengths"])
