"""The belief input (--belief-input N): the particle filter's belief block (csrc/wfrl_belief.h)
in the policy input, computed inside the compiled rollout loop. The compiled loop (SimSlots on
the simulator, the per-step actor on CybORG) against the Python reference loop with the plain
filter (wfrl.features.ParticleFilterReference), block by block and step by step, on both codes;
the block recorded in the buffer and handed to the learner; every collector; checkpoints, `wfrl
eval` and the refusals of bad combinations."""
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
from wfrl.envs.base import OBS_DIM
from wfrl.features import BELIEF_DIM, MEM_DIM, TRUTH_DIM
from wfrl.ppo.batch import to_batch
from wfrl.ppo.netspec import NetSpec
from wfrl.ppo.policy import ActorCritic
from wfrl.rng import episode_seeds
from wfrl.workflow import Workflow

WF = Workflow.parse("critical_first")
BOTH = NetSpec(hidden=32, memory=True, mask=True, belief=6)
BELIEF_ONLY = NetSpec(hidden=32, mask=True, belief=5, belief_reds=2)


def _model(net, seed=0, scale=4.0):
    """Perturbed weights whose actions depend strongly on the belief block (its input columns
    scaled up), so a wrong block changes the actions taken."""
    torch.manual_seed(seed)
    m = ActorCritic(net.hidden, net.in_dim)
    lo = OBS_DIM + (MEM_DIM if net.memory else 0) + (TRUTH_DIM if net.truth_input else 0)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.4)
        for seq in (m.actor, m.critic):
            seq[0].weight[:, lo:lo + BELIEF_DIM] *= scale
    return m


def _compare(backend_name, red, episodes, net, greedy=False, seed=11):
    """The compiled loop against the Python reference loop: the same belief block at every step
    (bit for bit), the same actions and observations, log-probabilities and values to rounding."""
    a = compare_with_reference(backend_name, red, episodes, net,
                               _model(net, seed=2).flat_weights(), WF, greedy, seed,
                               ("belief", "actions", "lengths", "obs"))
    bel = a["belief"].reshape(-1, BELIEF_DIM)
    np.testing.assert_allclose(bel[:, :TRUTH_DIM].reshape(-1, 13, 3).sum(-1), 1.0, atol=1e-6)
    assert len({tuple(r) for r in bel}) > 5           # the block follows the episodes
    return a


@pytest.mark.parametrize("backend", ["sim", "sim:leaderboard"])
@pytest.mark.parametrize("greedy", [False, True])
def test_compiled_sim_rollout_with_belief_equals_reference(backend, greedy):
    a = _compare(backend, "mixed", list(range(4)), BOTH, greedy)
    assert (a["belief"][:, :, 2:TRUTH_DIM:3] > 0).any()     # privileged access believed somewhere


def test_compiled_sim_rollout_belief_only_equals_reference():
    a = _compare("sim", "RedMeanderAgent", [3, 4], BELIEF_ONLY)
    np.testing.assert_array_equal(a["belief"][:, :, TRUTH_DIM + 1], 1.0)   # Meander particles only


@pytest.mark.cyborg
@pytest.mark.parametrize("backend", ["cyborg", "cyborg:leaderboard"])
def test_compiled_actor_on_cyborg_with_belief_equals_reference(backend):
    _compare(backend, "B_lineAgent", [0], BOTH)


def test_the_actor_input_carries_the_recorded_block():
    """The per-step actor's whole input (Actor.last_input) holds, after obs and memory, the very
    block the buffer recorded with the step."""
    w = _model(BOTH, seed=3).flat_weights()
    env_seed, act_seed = (int(s[0]) for s in episode_seeds(5, [0]))
    be = make_backend("sim", "B_lineAgent")
    actor = core.Actor(make_policy(w, BOTH, WF, 30.0))
    got = []
    buf = compiled_buffer(allocate_trajectory(1, 100, BOTH))
    actor_episode(be, actor, 0, env_seed, act_seed, buf, 0, 0,
                  after_step=lambda: got.append(actor.last_input()))
    lo = OBS_DIM + MEM_DIM
    np.testing.assert_array_equal(np.array(got)[:, lo:lo + BELIEF_DIM], buf.arrays["belief"][0])
    want = []
    run_episode_reference(be, w, BOTH, WF, 30.0, env_seed, act_seed, inputs=want)
    np.testing.assert_array_equal(np.array(got), np.array(want))


def test_batch_belief_block_is_the_recorded_block_and_reproduces_the_rollout():
    m = _model(BOTH, seed=4)
    be = make_backend("sim", "mixed")
    buf = compiled_buffer(allocate_trajectory(6, 100, BOTH))
    run_episodes(be, make_policy(m.flat_weights(), BOTH, WF, 30.0), range(6), 7, buf)
    batch = to_batch(buf, np.tile(WF.onehot(), (6, 1)), 0.99, 0.95, BOTH)
    assert batch.obs.shape == (600, BOTH.in_dim) and BOTH.in_dim == 52 + 66 + 42 + 25
    lo = OBS_DIM + MEM_DIM
    np.testing.assert_array_equal(batch.obs[:, lo:lo + BELIEF_DIM],
                                  buf.arrays["belief"].reshape(-1, BELIEF_DIM))
    assert_batch_reproduces_the_rollout(m, batch)
    plain = compiled_buffer(allocate_trajectory(6, 100))
    with pytest.raises(ValueError, match="belief field"):
        run_episodes(be, make_policy(m.flat_weights(), BOTH, WF, 30.0), range(6), 7, plain)


@pytest.mark.parametrize("name", ["sync", "async"])
def test_parallel_collectors_carry_the_belief_network(name):
    rows = collector_rows(("sequential", name), BOTH, _model(BOTH, seed=6).flat_weights(), WF, 8,
                          ("actions", "belief"))
    assert rows["sequential"][0] == rows[name][0]
    for mine, theirs in zip(rows["sequential"][1], rows[name][1]):
        np.testing.assert_array_equal(mine, theirs)


def test_a_slot_block_takes_another_belief_size_only_between_episodes():
    w6 = _model(BOTH).flat_weights()
    slots = core.SimSlots(2, "B_lineAgent")
    buf = compiled_buffer(allocate_trajectory(2, 100, BOTH))
    seeds = np.array([1, 2], np.uint64)
    slots.begin(seeds, seeds, np.array([0, 1], np.int64), buf)
    slots.step(make_policy(w6, BOTH, WF, 30.0), buf)
    other = NetSpec(hidden=32, memory=True, mask=True, belief=7)
    with pytest.raises(ValueError, match="in progress"):
        slots.step(make_policy(_model(other).flat_weights(), other, WF, 30.0), buf)


def test_bad_belief_settings_are_refused():
    w = _model(BOTH).flat_weights()
    with pytest.raises(ValueError, match="belief_reds"):
        make_policy(w, NetSpec(hidden=32, memory=True, mask=True, belief=6, belief_reds=0), WF, 1.0)
    with pytest.raises(ValueError, match="with belief"):     # weights of the network without it
        make_policy(_model(NetSpec(32, True, True)).flat_weights(), BOTH, WF, 1.0)
    policy = make_policy(w, BOTH, WF, 1.0, greedy=True)
    with pytest.raises(ValueError, match="belief input"):
        core.Planner(policy, 8, 2, 4, 2, 0.0, 1)
    from wfrl.errors import UserError
    from wfrl.evaluation.checkpoint import net_from_checkpoint
    assert net_from_checkpoint({"net": BOTH.to_dict()}) == BOTH
    assert net_from_checkpoint({"net": {"hidden": 64, "memory": True}}).belief == 0
    with pytest.raises(UserError, match="belief"):
        net_from_checkpoint({"net": {**BOTH.to_dict(), "belief": -3}})


_wfrl = run_wfrl


@pytest.fixture(scope="module")
def belief_run(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("belief-run"), "--belief-input", 8)


def test_checkpoint_records_the_belief_and_eval_plays_it(belief_run):
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    ck = load_checkpoint(belief_run / "checkpoint.pt")
    assert ck["net"]["belief"] == 8 and ck["net"]["belief_reds"] == 7
    weights, net = weights_from_checkpoint(ck)
    assert net == NetSpec(64, True, True, False, 8, 7) and weights.shape == (net.n_params,)
    assert json.loads((belief_run / "experiment_config.json").read_text())["ppo"][
        "belief_input"] == 8
    res = _wfrl("eval", "--cage2", "--checkpoint", belief_run / "checkpoint.pt", "--backend",
                "sim", "--episodes", 3)
    assert res.returncode == 0, res.stderr
    assert "B_line" in res.stdout and "Meander" in res.stdout
    # the search's rollouts carry no belief: --plan refuses it, in one line
    res = _wfrl("eval", "--checkpoint", belief_run / "checkpoint.pt", "--plan", "--episodes", 2)
    assert res.returncode == 2 and "belief" in res.stderr and "Traceback" not in res.stderr
    # a run without the flag does not start from the belief network
    res = _wfrl("train", "--workflow", "critical_first", "--init-from",
                belief_run / "checkpoint.pt", "--total-episodes", 10, "--out",
                belief_run / "again")
    assert res.returncode == 2 and "belief" in res.stderr and "Traceback" not in res.stderr
    res = _wfrl("train", "--workflow", "critical_first", "--belief-red", "Blue",
                "--total-episodes", 10, "--out", belief_run / "bad")
    assert res.returncode == 2 and "Traceback" not in res.stderr


@pytest.mark.slow
@pytest.mark.cyborg
def test_eval_plays_the_belief_policy_on_both_cyborg_codes(belief_run):
    res = _wfrl("eval", "--checkpoint", belief_run / "checkpoint.pt", "--backend",
                "cyborg:leaderboard", "--red-agent", "B_lineAgent", "--episodes", 1, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["n"] == 1
    res = _wfrl("eval", "--checkpoint", belief_run / "checkpoint.pt", "--backend", "cyborg",
                "--red-agent", "RedMeanderAgent", "--episodes", 1, "--json")
    assert res.returncode == 0, res.stderr
