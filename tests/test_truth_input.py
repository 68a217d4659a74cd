"""The truth input (--truth-input, the full-information bound): red's true access per host as a
one-hot block of the policy input. The compiled block (csrc/wfrl_truth.h) against its plain twin
(wfrl.features.truth_features) and against a one-hot written here; the compiled rollout loop and
the compiled per-step actor against the Python reference loop at the wider input; the learner's
batch rebuilt from the buffer's recorded access; the learner's compiled steps at the new width;
checkpoints and `wfrl eval` with the flag."""
import dataclasses
import json

import numpy as np
import pytest
import torch
import wfrl._core as core
from _helpers import (
    assert_batch_reproduces_the_rollout,
    collector_rows,
    compare_with_reference,
    run_wfrl,
    train_tiny,
)

from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.collect.rollout import actor_episode, make_policy, run_episode_reference, run_episodes
from wfrl.envs import make_backend
from wfrl.envs.actions import N_HOSTS
from wfrl.envs.base import OBS_DIM
from wfrl.features import MEM_DIM, TRUTH_DIM, truth_features
from wfrl.ppo.batch import reference_truth_rows, to_batch
from wfrl.ppo.netspec import NetSpec
from wfrl.ppo.policy import ActorCritic
from wfrl.rng import episode_seeds
from wfrl.workflow import COND_DIM, Workflow

WF = Workflow.parse("critical_first")
FULL = NetSpec(hidden=32, memory=True, mask=True, truth_input=True)
TRUTH_ONLY = NetSpec(hidden=32, truth_input=True)


def _model(net, seed=0, truth_scale=3.0):
    """Perturbed weights whose actions depend strongly on the truth block (its input columns
    scaled up), so a wrong block changes the actions taken."""
    torch.manual_seed(seed)
    m = ActorCritic(net.hidden, net.in_dim)
    lo = OBS_DIM + (MEM_DIM if net.memory else 0)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.4)
        if net.truth_input:
            for seq in (m.actor, m.critic):
                seq[0].weight[:, lo:lo + TRUTH_DIM] *= truth_scale
    return m


def _by_hand(access):
    """The block as the layout says: host h's level l at float 3h + l."""
    out = np.zeros(TRUTH_DIM, np.float32)
    for h, level in enumerate(access):
        if level <= 2:
            out[3 * h + level] = 1.0
    return out


def test_truth_block_by_hand_on_both_twins():
    access = np.array([[0, 1, 2, 0, 0, 1, 1, 2, 2, 0, 1, 2, 0],
                       [2] * N_HOSTS,
                       [0] * N_HOSTS,
                       [3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]], np.uint8)   # out of range: zeros
    want = np.array([_by_hand(a) for a in access])
    assert want.shape == (4, TRUTH_DIM) and TRUTH_DIM == 39 and core.TRUTH_DIM == TRUTH_DIM
    assert want[0, 3 * 7 + 2] == 1 and want[0, 3 * 1 + 1] == 1 and want[3].sum() == 11
    np.testing.assert_array_equal(truth_features(access), want)
    rows = access[None].copy()                         # one buffer row of 4 steps
    np.testing.assert_array_equal(core.truth_rows(rows, np.array([4], np.int32)), want)
    np.testing.assert_array_equal(core.truth_rows(rows, np.array([2], np.int32)), want[:2])


def test_input_widths():
    assert core.in_dim(False, True) == NetSpec(truth_input=True).in_dim == 52 + 39 + 25
    assert core.in_dim(True, True) == FULL.in_dim == 52 + 66 + 39 + 25
    assert core.in_dim(True, True, True) == core.MAX_IN_DIM == 52 + 66 + 39 + 42 + 25
    assert NetSpec(memory=True).in_dim == core.in_dim(True) == 52 + 66 + 25
    assert "truth input on" in FULL.describe() and "truth" not in NetSpec().describe()
    pol = make_policy(_model(FULL).flat_weights(), FULL, WF, 30.0)
    assert pol.truth and pol.in_dim == FULL.in_dim
    with pytest.raises(ValueError, match="with truth"):    # weights of the network without it
        make_policy(_model(NetSpec(32, True, True)).flat_weights(), FULL, WF, 30.0)


@pytest.mark.parametrize("net", [FULL, TRUTH_ONLY])
def test_c_forward_at_the_truth_widths_equals_torch(net):
    m = _model(net, seed=1)
    x = np.random.default_rng(0).random((5, net.in_dim)).astype(np.float32)
    logits, values = core.mlp_forward(m.flat_weights(), net.hidden, x)
    with torch.no_grad():
        tl, tv = m(torch.as_tensor(x))
    np.testing.assert_allclose(logits, tl.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values, tv.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        core.mlp_forward(m.flat_weights(), net.hidden, np.zeros((1, net.in_dim + 1), np.float32))


def _compare(backend_name, red, episodes, net, greedy=False, seed=11):
    """The compiled loop against the Python reference loop: the same actions, access and
    observations, the same log-probabilities and values to float rounding."""
    return compare_with_reference(backend_name, red, episodes, net,
                                  _model(net, seed=2).flat_weights(), WF, greedy, seed)


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
@pytest.mark.parametrize("greedy", [False, True])
def test_compiled_sim_rollout_with_truth_equals_reference(red, greedy):
    a = _compare("sim", red, list(range(20)), FULL, greedy)
    assert (a["red_access"] == 1).any() and (a["red_access"] == 2).any()   # every level occurs


def test_compiled_sim_rollout_truth_only_equals_reference():
    _compare("sim", "mixed", list(range(20)), TRUTH_ONLY)


@pytest.mark.cyborg
def test_compiled_actor_on_cyborg_with_truth_equals_reference():
    _compare("cyborg", "B_lineAgent", [0, 1], FULL)


@pytest.mark.parametrize("net", [FULL, TRUTH_ONLY])
def test_compiled_actor_input_is_the_reference_input_bit_for_bit(net):
    """The per-step actor's whole input vector (Actor.last_input) against the reference loop's,
    step by step, and its truth block against the one-hot of the access it acted on."""
    w = _model(net, seed=3).flat_weights()
    env_seed, act_seed = (int(s[0]) for s in episode_seeds(5, [0]))
    be = make_backend("sim", "B_lineAgent")
    actor = core.Actor(make_policy(w, net, WF, 30.0))
    got = []
    buf = compiled_buffer(allocate_trajectory(1, 100))
    actor_episode(be, actor, 0, env_seed, act_seed, buf, 0, 0,
                  after_step=lambda: got.append(actor.last_input()))
    want = []
    run_episode_reference(be, w, net, WF, 30.0, env_seed, act_seed, inputs=want)
    np.testing.assert_array_equal(np.array(got), np.array(want))
    lo = OBS_DIM + (MEM_DIM if net.memory else 0)
    hand = np.array([_by_hand(acc) for acc in buf.arrays["red_access"][0]])
    np.testing.assert_array_equal(np.array(got)[:, lo:lo + TRUTH_DIM], hand)
    np.testing.assert_array_equal(np.array(got)[:, -COND_DIM:], np.tile(WF.onehot(), (100, 1)))


def test_batch_truth_block_is_the_recorded_access_and_reproduces_the_rollout():
    """to_batch rebuilds the block from the buffer's red access: the one-hot of that access, in
    the place the rollout put it; the network on the batch's input gives the log-probabilities
    and values the compiled loop computed while acting. Rows of different lengths and an empty
    row: the compiled truth_rows equals its twin."""
    m = _model(FULL, seed=4)
    be = make_backend("sim", "mixed")
    buf = compiled_buffer(allocate_trajectory(12, 100))
    run_episodes(be, make_policy(m.flat_weights(), FULL, WF, 30.0), range(12), 7, buf)
    a = buf.arrays
    batch = to_batch(buf, np.tile(WF.onehot(), (12, 1)), 0.99, 0.95, FULL)
    assert batch.obs.shape == (1200, FULL.in_dim)
    lo = OBS_DIM + MEM_DIM
    hand = np.array([_by_hand(acc) for acc in a["red_access"].reshape(-1, N_HOSTS)])
    np.testing.assert_array_equal(batch.obs[:, lo:lo + TRUTH_DIM], hand)
    assert hand[:, 2::3].any() and hand[:, 1::3].any()
    assert_batch_reproduces_the_rollout(m, batch)
    ref = to_batch(buf, np.tile(WF.onehot(), (12, 1)), 0.99, 0.95, FULL, reference=True)
    np.testing.assert_array_equal(ref.obs, batch.obs)
    lengths = a["lengths"].copy()
    lengths[3], lengths[8] = 0, 41
    np.testing.assert_array_equal(core.truth_rows(a["red_access"], lengths),
                                  reference_truth_rows(a["red_access"], lengths))
    assert len(reference_truth_rows(a["red_access"], lengths)) == lengths.sum()


@pytest.mark.parametrize("name", ["sync", "async"])
def test_parallel_collectors_carry_the_truth_network(name):
    rows = collector_rows(("sequential", name), FULL, _model(FULL, seed=6).flat_weights(), WF, 24)
    assert rows["sequential"][0] == rows[name][0]
    np.testing.assert_array_equal(rows["sequential"][1][0], rows[name][1][0])


@pytest.mark.parametrize("compact", [True, False])
def test_compiled_learner_steps_at_the_truth_width_equal_the_torch_steps(compact, monkeypatch):
    """The learner's compiled minibatch steps (csrc/wfrl_update.h) on a real batch of the widest
    input (obs ⊕ memory ⊕ truth ⊕ workflow) against the same steps through torch."""
    import wfrl.ppo.learner as learner_module
    from wfrl.collect.base import make_collector
    from wfrl.config.run import PPOConfig
    from wfrl.ppo.learner import PPOLearner
    monkeypatch.setattr(learner_module, "COMPILED_FAST", True)
    cfg = PPOConfig(hidden=32, memory=True, mask=True, truth_input=True, clip_per_net=True)
    assert cfg.net() == FULL
    col = make_collector("sequential", "sim", "mixed", cfg.net(), 3, 30.0, False, 1, 12)
    try:
        col.collect(PPOLearner(cfg, seed=3).flat_weights(), 0, WF, 100, 12)
        batch = to_batch(col.buffer, np.tile(WF.onehot(), (12, 1)), cfg.gamma, cfg.gae_lambda,
                         cfg.net())
    finally:
        col.close()
    c = PPOLearner(cfg, seed=9, compact=compact)
    t = PPOLearner(cfg, seed=9, compact=compact, compiled=False)
    for _k in range(3):
        sc, st = c.update(batch), t.update(batch)
        assert c._net_steps is not None and t._net_steps is None
        for key in sc:
            assert sc[key] == pytest.approx(st[key], rel=1e-4, abs=1e-6), key
    np.testing.assert_allclose(c.flat_weights(), t.flat_weights(), rtol=1e-4, atol=2e-6)
    assert not np.allclose(c.flat_weights(), PPOLearner(cfg, seed=9).flat_weights(),
                           rtol=1e-4, atol=2e-6)
    w1 = c.model.actor[0].weight.grad.numpy()
    assert np.abs(w1[:, OBS_DIM + MEM_DIM:OBS_DIM + MEM_DIM + TRUTH_DIM]).sum() > 0


def test_older_checkpoints_load_without_the_truth_input():
    from wfrl.evaluation.checkpoint import net_from_checkpoint
    assert net_from_checkpoint({"net": {"hidden": 64, "memory": True, "mask": True}}) == \
        NetSpec(64, True, True, False)
    assert net_from_checkpoint({"hidden": 64}) == NetSpec(64)
    assert net_from_checkpoint({"net": FULL.to_dict()}) == FULL


_wfrl = run_wfrl


@pytest.fixture(scope="module")
def truth_run(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("truth-run"), "--truth-input")


def test_checkpoint_records_the_truth_input_and_eval_plays_it(truth_run):
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    ck = load_checkpoint(truth_run / "checkpoint.pt")
    assert ck["net"]["truth_input"] is True
    weights, net = weights_from_checkpoint(ck)
    assert net == NetSpec(64, True, True, True) and weights.shape == (net.n_params,)
    cfg = json.loads((truth_run / "experiment_config.json").read_text())
    assert cfg["ppo"]["truth_input"] is True
    res = _wfrl("eval", "--checkpoint", truth_run / "checkpoint.pt", "--backend", "sim",
                "--red-agent", "B_lineAgent", "--episodes", 3, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["n"] == 3
    res = _wfrl("eval", "--cage2", "--checkpoint", truth_run / "checkpoint.pt", "--backend", "sim",
                "--episodes", 3)
    assert res.returncode == 0, res.stderr
    assert "B_line" in res.stdout and "Meander" in res.stdout
    # --init-from refuses the truth network for a run without the flag, in one line
    res = _wfrl("train", "--workflow", "critical_first", "--init-from",
                truth_run / "checkpoint.pt", "--total-episodes", 10, "--out",
                truth_run / "again")
    assert res.returncode == 2 and "truth input on" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
@pytest.mark.cyborg
def test_eval_plays_the_truth_policy_on_both_cyborg_codes(truth_run):
    res = _wfrl("eval", "--cage2", "--checkpoint", truth_run / "checkpoint.pt", "--backend",
                "cyborg", "--episodes", 1, "--n-workers", 1)
    assert res.returncode == 0, res.stderr
    assert "B_line" in res.stdout and "Meander" in res.stdout
    res = _wfrl("eval", "--checkpoint", truth_run / "checkpoint.pt", "--backend",
                "cyborg:leaderboard", "--red-agent", "B_lineAgent", "--episodes", 1, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["n"] == 1


def test_runs_stored_before_the_truth_input_continue_without_it(tmp_path):
    """A ground-truth run, an exhaustive table or a search stored before the setting existed
    carries no ppo.truth_input: it continues as it began (without), and is refused with it."""
    from wfrl.config.run import ExhaustiveConfig, PPOConfig
    from wfrl.errors import UserError
    from wfrl.search.exhaustive import check_same_protocol
    from wfrl.search.truth import check_same_settings
    for protocol, check in (("recipe", check_same_settings), ("finetune", check_same_protocol)):
        old = ExhaustiveConfig(out=str(tmp_path), protocol=protocol, ppo=PPOConfig())
        stored = dataclasses.asdict(old)
        del stored["ppo"]["truth_input"]
        (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
        check(old, tmp_path)
        with pytest.raises(UserError, match="was started with ppo"):
            check(dataclasses.replace(old, ppo=PPOConfig(truth_input=True)), tmp_path)
