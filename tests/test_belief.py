"""The belief block (csrc/wfrl_belief.h): the compiled block of the particle filter's particles
equals its plain twin (wfrl.features.belief_features over wfrl.features.ParticleFilterReference's
particles) step by step on both codes, and it says what a belief should: shares that sum to one,
the true red kind sorted out, the true access held with weight."""
import numpy as np
import pytest
from test_plan import _episode_obs, _policy
from wfrl._core import (
    BELIEF_DIM,
    PLAN_RED_MEANDER,
    Cage2Sim,
    ParticleFilter,
    Planner,
    cage2_red_access,
    cage2_red_kind,
)

from wfrl.features import TRUTH_DIM, ParticleFilterReference, belief_features


def test_the_plain_block_of_known_particles():
    ra = np.array([[0] * 13, [2] + [1] * 12, [2] + [0] * 12, [9] * 13], np.uint8)
    out = belief_features(ra, np.array([0, 1, 1, 2]))
    assert out.shape == (BELIEF_DIM,) and BELIEF_DIM == TRUTH_DIM + 3
    np.testing.assert_array_equal(out[0:3], [0.25, 0.0, 0.5])      # host 0: none, -, priv x2
    np.testing.assert_array_equal(out[3:6], [0.5, 0.25, 0.0])      # a level outside 0..2: none
    np.testing.assert_array_equal(out[TRUTH_DIM:], [0.25, 0.5, 0.25])


@pytest.mark.parametrize("red_set,leaderboard,red", [(7, False, "B_lineAgent"),
                                                     (7, True, "RedMeanderAgent"),
                                                     (PLAN_RED_MEANDER, True, "RedMeanderAgent")])
@pytest.mark.parametrize("compiled", ["planner", "filter"])
def test_compiled_block_equals_the_plain_twin_step_by_step(red_set, leaderboard, red, compiled):
    """Both compiled holders of a filter: the planner's and the filter on its own (the belief
    wrapper's), with the same random streams."""
    rng = np.random.default_rng(8)
    actions = rng.integers(0, 145, 30)
    obs = _episode_obs(red, 21, actions)
    obs[17] = np.ones(52, np.float32)     # an observation no particle explains: the fallback
    n, seed, key = 60, 9, 5
    c = (Planner(_policy(), n, 1, 0, 1, 0.0, seed) if compiled == "planner"
         else ParticleFilter(n, seed))
    c.reset(red_set, leaderboard, key)
    ref = ParticleFilterReference(n, seed)
    ref.reset(red_set, leaderboard, key)
    seen = []
    np.testing.assert_array_equal(c.belief_features(), ref.belief())
    for t, (a, o) in enumerate(zip(actions, obs)):
        c.observe(int(a), o)
        ref.observe(int(a), o)
        got = c.belief_features()
        np.testing.assert_array_equal(got, ref.belief(), err_msg=f"step {t}")
        seen.append(got)
    seen = np.array(seen)
    # shares: every host's three levels and the kinds sum to one
    np.testing.assert_allclose(seen[:, :TRUTH_DIM].reshape(-1, 13, 3).sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(seen[:, TRUTH_DIM:].sum(-1), 1.0, atol=1e-6)
    assert len({tuple(r) for r in seen}) > 5     # it moves with the episode


def test_the_belief_finds_the_red_and_weighs_the_true_access():
    from wfrl.collect.rollout import make_policy
    from wfrl.evaluation.cage2 import policy_of_checkpoint
    from wfrl.workflow import Workflow
    weights, net, wf, lam, foothold = policy_of_checkpoint("pretrained:critical_first")
    pol = make_policy(weights, net, Workflow.parse(wf), lam, foothold, greedy=True)
    for red, kind in (("B_lineAgent", 0), ("RedMeanderAgent", 1)):
        sim = Cage2Sim(1, red)
        obs, _ = sim.reset(0, 4)
        p = Planner(pol, 300, 1, 0, 1, 0.0, 1)
        p.reset(7, False, 4)
        truth_weight = []
        a = 0
        for t in range(60):
            if t:
                p.observe(a, obs)
                b = p.belief_features()
                access = cage2_red_access(sim, 0)
                truth_weight.append(np.mean([b[3 * h + access[h]] for h in range(13)]))
            a = p.decide(obs)[0]
            obs = sim.step(0, a)[0]
        assert cage2_red_kind(sim, 0) == kind
        assert b[TRUTH_DIM + kind] > 0.9, (red, b[TRUTH_DIM:])
        assert np.mean(truth_weight) > 0.8, (red, np.mean(truth_weight))


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_the_vector_belief_wrapper_equals_the_plain_filter_step_by_step(mode):
    import wfrl.envs as envs
    from wfrl.envs.memory_env import VecBeliefWrapper
    n, particles, seed = 2, 24, 3
    venv = VecBeliefWrapper(envs.make_vec(n, "mixed", 7, autoreset_mode=mode, max_steps=30),
                            particles=particles, seed=seed)
    refs = [ParticleFilterReference(particles, seed) for _ in range(n)]
    episodes = [0] * n

    def begin(i):
        refs[i].reset(7, False, episodes[i] * 1024 + i)
        episodes[i] += 1

    obs, _ = venv.reset()
    for i in range(n):
        begin(i)
    rng = np.random.default_rng(1)
    resets_next = np.zeros(n, bool)
    for t in range(75):
        for i in range(n):
            np.testing.assert_array_equal(obs[i, 52:], refs[i].belief(), err_msg=f"{mode} {i} {t}")
        acts = rng.integers(0, 145, n).astype(np.int32)
        obs, _, term, trunc, info = venv.step(acts)
        done = term | trunc
        for i in range(n):
            if mode == "NextStep" and resets_next[i]:
                begin(i)
            elif mode == "SameStep" and done[i]:
                refs[i].observe(int(acts[i]), info["final_obs"][i][:52])
                np.testing.assert_array_equal(info["final_obs"][i][52:], refs[i].belief())
                begin(i)
            else:
                refs[i].observe(int(acts[i]), obs[i, :52])
        resets_next = done if mode == "NextStep" else resets_next
    assert min(episodes) >= 3


def test_the_belief_wrapper_refuses_bad_settings():
    import wfrl.envs as envs
    from wfrl.envs.memory_env import VecBeliefWrapper
    from wfrl.errors import UserError
    with pytest.raises(UserError, match="particles"):
        VecBeliefWrapper(envs.make_vec(2), particles=0)
    with pytest.raises(UserError, match="unknown plan red"):
        VecBeliefWrapper(envs.make_vec(2), red="Blue")
