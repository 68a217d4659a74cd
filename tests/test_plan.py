"""Decision-time search (csrc/wfrl_plan.h, wfrl.evaluation.planner): the compiled belief update held equal to its
Python twin, the belief's quality on episodes of the simulator, the compliance veto, the time
limit, determinism, and bad budgets."""

import numpy as np
import pytest
from _helpers import run_wfrl
from wfrl._core import (
    CAGE2_STATE_RNG_OFFSET,
    PLAN_RED_BLINE,
    PLAN_RED_MEANDER,
    Cage2Sim,
    Planner,
    Policy,
    in_dim,
    mlp_n_params,
)

from wfrl.errors import UserError
from wfrl.evaluation.planner import PlanBudget, PlanningPolicy
from wfrl.features import TRUTH_DIM, ParticleFilterReference
from wfrl.workflow import Workflow

WF = Workflow.parse("op_server,enterprise,defender,op_host,user")
H = 8
RESTORE, REMOVE = 132, 15
ENT0, USER1, USER2 = 1, 9, 10


def _policy(bias=None, seed=0, mask=True):
    """A small memory+mask policy: random weights, or zero weights with this actor output bias
    (then its logits are exactly the bias, whatever it observes)."""
    n = mlp_n_params(H, in_dim(True))
    if bias is None:
        w = (np.random.default_rng(seed).standard_normal(n) * 0.3).astype(np.float32)
    else:
        w = np.zeros(n, np.float32)
        I = in_dim(True)
        off = H * I + H + H * H + H + 145 * H
        w[off:off + 145] = bias
    return Policy(w, H, WF.onehot(), WF.rank, 30.0, False, True, True, mask, False)


def _episode_obs(red, seed, actions):
    sim = Cage2Sim(1, red)
    sim.reset(0, seed)
    return [sim.step(0, int(a))[0] for a in actions]


@pytest.mark.parametrize("red_set,leaderboard", [(7, False), (PLAN_RED_MEANDER, True)])
def test_particle_update_equals_python_twin(red_set, leaderboard):
    rng = np.random.default_rng(3)
    actions = rng.integers(0, 145, 14)
    red = "RedMeanderAgent" if red_set == PLAN_RED_MEANDER else "B_lineAgent"
    obs = _episode_obs(red, 11, actions)
    obs[9] = np.ones(52, np.float32)     # an observation no particle can explain: the fallback
    n, seed, key = 48, 5, 77
    c = Planner(_policy(), n, 1, 0, 1, 0.0, seed)
    c.reset(red_set, leaderboard, key)
    ref = ParticleFilterReference(n, seed)
    ref.reset(red_set, leaderboard, key)
    assert np.array_equal(c.particle_states(), ref.states())
    fallbacks = 0
    for a, o in zip(actions, obs):
        exact = c.observe(int(a), o)
        assert exact == ref.observe(int(a), o)
        fallbacks += exact == 0
        assert np.array_equal(c.particle_states(), ref.states())
    assert fallbacks >= 1 and c.counters()["fallbacks"] == fallbacks == ref.fallbacks


def _greedy_episode(planner, red, seed, steps=100, key=0, red_set=None, count=True):
    """Play the planner's decisions on a true simulator episode; returns (actions, share of
    observed steps whose true state some particle holds)."""
    sim = Cage2Sim(1, red)
    obs, _ = sim.reset(0, seed)
    planner.reset(red_set if red_set is not None else 7, False, key)
    actions, hits = [], []
    for t in range(steps):
        if t:
            planner.observe(actions[-1], obs)
            if count:
                hits.append(planner.count_state(sim, 0) > 0)
        a = planner.decide(obs)[0]
        actions.append(a)
        obs = sim.step(0, a)[0]
    return actions, (float(np.mean(hits)) if hits else None)


@pytest.fixture(scope="module")
def shipped():
    from wfrl.collect.rollout import make_policy
    from wfrl.evaluation.cage2 import policy_of_checkpoint
    weights, net, wf, lam, foothold = policy_of_checkpoint("pretrained:critical_first")
    return make_policy(weights, net, Workflow.parse(wf), lam, foothold, greedy=True)


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
def test_belief_holds_the_true_state(shipped, red):
    """With the episode's red known and 1000 particles, the true state (its RNG aside) is among
    the particles at most steps of the shipped policy's episodes on the simulator."""
    shares = []
    bit = PLAN_RED_BLINE if red == "B_lineAgent" else PLAN_RED_MEANDER
    for seed in (101, 202):
        p = Planner(shipped, 1000, 1, 0, 1, 0.0, seed)
        shares.append(_greedy_episode(p, red, seed, red_set=bit)[1])
        assert p.counters()["fallbacks"] == 0
    assert min(shares) >= 0.8, shares


def test_mixture_sorts_out_the_red(shipped):
    """Particles of all three kinds at reset; after a few B_line steps only B_line ones remain."""
    p = Planner(shipped, 300, 1, 0, 1, 0.0, 1)
    _greedy_episode(p, "B_lineAgent", 9, steps=12, red_set=7, count=False)
    states = p.particle_states()
    kinds = set(states[:, _RED_KIND_OFFSET].tolist())
    assert kinds == {0}, kinds


def _red_kind_offset():
    """Where red_kind lies in the raw state: the first byte that differs between the reset
    states of B_line and Meander (the other: red_code, the kind reset was given, two bytes on)."""
    a, b = Cage2Sim(1, "B_lineAgent"), Cage2Sim(1, "RedMeanderAgent")
    a.reset(0, 0)
    b.reset(0, 0)
    from wfrl._core import cage2_state
    sa = np.frombuffer(cage2_state(a, 0), np.uint8)[:CAGE2_STATE_RNG_OFFSET]
    sb = np.frombuffer(cage2_state(b, 0), np.uint8)[:CAGE2_STATE_RNG_OFFSET]
    diff = np.flatnonzero(sa != sb)
    assert len(diff) == 2 and diff[1] == diff[0] + 2, diff
    return int(diff[0])


_RED_KIND_OFFSET = _red_kind_offset()


def _after_bline_sleeps(planner, steps=9):
    """Sleep `steps` steps against B_line (red reaches the Enterprise subnet by then)."""
    sim = Cage2Sim(1, "B_lineAgent")
    obs, _ = sim.reset(0, 4)
    planner.reset(PLAN_RED_BLINE, False, 0)
    for _ in range(steps):
        obs = sim.step(0, 0)[0]
        planner.observe(0, obs)
    return sim, obs


def _bias(*ranked):
    b = np.full(145, -5.0, np.float32)
    for k, a in enumerate(ranked):
        b[a] = 10.0 - k
    return b


def test_compliance_veto():
    """Against B_line holding Enterprise hosts, restoring a User host breaks the workflow rule
    (op_server, enterprise first): a candidate that breaks it where the greedy action does not
    is vetoed; one that does not break it is kept; when the greedy action breaks it too, nothing
    is vetoed."""
    sim = Cage2Sim(1, "B_lineAgent")
    obs, _ = sim.reset(0, 4)
    for _ in range(9):
        obs, _, access = sim.step(0, 0)
    assert access[ENT0] or access[2] or access[3], access     # red holds an Enterprise host
    cases = [((0, RESTORE + USER1, RESTORE + ENT0), 1, 2),
             ((0, RESTORE + ENT0, RESTORE + 2, RESTORE + 3), 0, 4),
             ((RESTORE + USER1, RESTORE + USER2), 0, 2)]
    for ranked, vetoed, searched in cases:
        p = Planner(_policy(_bias(*ranked), mask=False), 200, len(ranked), 4, 3, 0.0, 2)
        _, obs = _after_bline_sleeps(p)
        a, greedy, n_cand, n_vetoed, rounds, _, _, _ = p.decide(obs)
        assert greedy == ranked[0]
        assert (n_vetoed, n_cand) == (vetoed, searched), ranked
        if vetoed:
            assert a != RESTORE + USER1


def test_time_limit_stops_the_rounds():
    p = Planner(_policy(seed=4), 200, 4, 4096, 100, 5.0, 3)
    obs = np.zeros(52, np.float32)
    p.reset(7, False, 0)
    a, greedy, n_cand, _, rounds, timed_out, ms, _ = p.decide(obs)
    assert timed_out and 1 <= rounds < 4096
    assert ms < 5.0 + 50.0          # one round past the limit at most (a round: 4 x 100 steps)
    # nothing evaluated in time (fewer than two rounds): the greedy action
    p = Planner(_policy(seed=4), 200, 4, 4096, 100, 1e-6, 3)
    p.reset(7, False, 0)
    a, greedy, _, _, rounds, timed_out, _, _ = p.decide(obs)
    assert rounds == 1 and timed_out and a == greedy


def test_deterministic_for_a_seed():
    pol = _policy(seed=7)
    runs = []
    for seed in (5, 5, 6):
        p = Planner(pol, 300, 4, 16, 8, 0.0, seed)
        actions, _ = _greedy_episode(p, "RedMeanderAgent", 21, steps=30, key=9, count=False)
        runs.append((actions, p.particle_states(), p.counters()))
    assert runs[0][0] == runs[1][0] and np.array_equal(runs[0][1], runs[1][1])
    assert runs[0][2] == runs[1][2]
    assert not np.array_equal(runs[0][1], runs[2][1])
    assert runs[0][2]["switches"] > 0        # the search did leave the greedy action


@pytest.mark.parametrize("field,value,fragment", [
    ("particles", 0, "--plan-particles"), ("candidates", 17, "--plan-candidates"),
    ("rollouts", -1, "--plan-rollouts"), ("depth", 0, "--plan-depth"),
    ("time_ms", -1.0, "--plan-time-ms"), ("seed", -3, "--plan-seed")])
def test_bad_budget_is_one_line(field, value, fragment):
    with pytest.raises(UserError, match=fragment) as exc:
        PlanBudget(**{field: value}).check()
    assert "\n" not in str(exc.value)
    if field == "seed":
        return                                    # an unsigned 64-bit number in the binding
    args = {"particles": 10, "candidates": 2, "rollouts": 2, "depth": 2, "time_ms": 0.0}
    args[field] = value
    with pytest.raises(ValueError, match=field.replace("time_ms", "time_limit_ms")):
        Planner(_policy(), args["particles"], args["candidates"], args["rollouts"],
                args["depth"], args["time_ms"], 0)


def test_cli_bad_budget_and_plan_eval(tmp_path):
    run = run_wfrl
    bad = run("eval", "--checkpoint", "pretrained:critical_first", "--plan",
              "--plan-particles", "0")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "--plan-particles" in bad.stderr and "Traceback" not in bad.stderr
    bad = run("eval", "--cage2", "--checkpoint", "pretrained:critical_first", "--plan",
              "--sampling")
    assert bad.returncode == 2 and "--plan" in bad.stderr
    import json
    ok = run("eval", "--checkpoint", "pretrained:critical_first", "--plan", "--episodes", "2",
             "--plan-particles", "100", "--plan-rollouts", "4", "--plan-depth", "4", "--json")
    assert ok.returncode == 0, ok.stderr
    res = json.loads(ok.stdout)
    assert res["plan"]["n"] == 2 and res["plan"]["search"]["decisions"] == 200
    page = tmp_path / "r.html"
    ok = run("replay", "--checkpoint", "pretrained:critical_first", "--plan", "--steps", "5",
             "--plan-particles", "50", "--plan-rollouts", "2", "--html", str(page))
    assert ok.returncode == 0, ok.stderr
    assert page.exists()


def test_planning_policy_on_the_simulator_backend(shipped):
    """PlanningPolicy through the evaluation's episode loop: same seeds, same returns; the search
    statistics count every decision."""
    from wfrl.envs import make_backend
    from wfrl.evaluation.planner import PlanStats, play_planned
    out = []
    for _ in range(2):
        backend = make_backend("sim", "B_lineAgent", seed=1)
        pp = PlanningPolicy(backend="sim", budget=PlanBudget(200, 3, 6, 5, 0.0, 1), red="known",
                            policy=shipped)
        st = PlanStats()
        res = play_planned(backend, pp, WF, 30.0, False, range(2), 42, 100, st)
        out.append(([r.env_return for r in res], st.summary()))
    assert out[0][0] == out[1][0]
    assert out[0][1]["decisions"] == 200 and out[0][1]["belief_steps"] == 198
    assert out[0][1]["belief_quality"] > 0.5


def test_planning_policy_takes_a_named_red_and_refuses_an_unknown_one(shipped):
    pp = PlanningPolicy(backend="sim", budget=PlanBudget(50, 1, 0, 1, 0.0, 1),
                        red="RedMeanderAgent", policy=shipped)
    pp.reset("B_lineAgent", key=3)
    assert pp.planner.belief_features()[TRUTH_DIM + 1] == 1.0     # every particle is Meander
    with pytest.raises(UserError, match="unknown --plan-red"):
        PlanningPolicy(backend="sim", red="Blue", policy=shipped)


def _choice_by_rule(vals, z):
    """Plain twin of the planner's choice from its paired rollout values [K, rounds]: the
    candidate with the largest paired mean gain over the greedy one (row 0) that is positive and
    above z standard errors, else the greedy one (index 0)."""
    k, r = vals.shape
    best, best_gain = 0, 0.0
    if r < 2:
        return 0, 0.0
    for c in range(1, k):
        d = vals[c] - vals[0]
        mean = d.mean()
        se = np.sqrt(max(d.var(ddof=1), 0.0) / r)
        if mean > 0 and mean > z * se and mean > best_gain:
            best, best_gain = c, mean
    return best, best_gain


@pytest.mark.parametrize("z", [0.0, 1.0])
def test_choice_follows_the_rule_on_the_rollout_values(z):
    """Every decision of an episode chooses what the rule says from the rollout values the
    planner reports (last_estimates); some decisions leave the greedy action."""
    p = Planner(_policy(seed=11), 200, 4, 12, 6, 0.0, 4, True, z)
    sim = Cage2Sim(1, "RedMeanderAgent")
    obs, _ = sim.reset(0, 13)
    p.reset(7, False, 3)
    switched = 0
    for _t in range(40):
        a, greedy, k, _, rounds, _, _, gain = p.decide(obs)
        cand, vals = p.last_estimates(k, rounds)
        assert cand[0] == greedy and vals.shape == (k, rounds)
        if k > 1:
            c, g = _choice_by_rule(vals, z)
            assert a == cand[c] and gain == pytest.approx(g, abs=1e-9)
        switched += a != greedy
        obs = sim.step(0, a)[0]
        p.observe(a, obs)
    assert switched > 0


def test_particles_set_to_the_true_state():
    """set_particles_to makes every particle the true state (RNG aside) and keeps the particles'
    own random streams, so rollouts from them still differ."""
    p = Planner(_policy(seed=2), 64, 3, 16, 8, 0.0, 1)
    _, obs = _after_bline_sleeps(p)
    sim = Cage2Sim(1, "RedMeanderAgent")      # a state no B_line particle holds
    sim.reset(0, 5)
    for _ in range(6):
        sim.step(0, 0)
    assert p.count_state(sim, 0) == 0
    rngs = p.particle_states()[:, CAGE2_STATE_RNG_OFFSET:].copy()
    p.set_particles_to(sim, 0)
    assert p.count_state(sim, 0) == 64
    assert np.array_equal(p.particle_states()[:, CAGE2_STATE_RNG_OFFSET:], rngs)
    _, _, k, _, rounds = p.decide(obs)[:5]
    _, vals = p.last_estimates(k, rounds)
    assert np.unique(vals[0]).size > 1


def _truth_policy(seed):
    from wfrl._core import in_dim as _in_dim
    n = mlp_n_params(H, _in_dim(True, True))
    w = (np.random.default_rng(seed).standard_normal(n) * 0.3).astype(np.float32)
    return Policy(w, H, WF.onehot(), WF.rank, 30.0, False, True, True, True, True)


def test_rollout_policy():
    """Rollouts continued by the acting policy itself equal the default; by another policy
    (here one with the truth input, fed each particle's true access) they value the same
    candidates differently."""
    def estimates(rollout_policy):
        p = Planner(_policy(seed=5), 100, 4, 8, 10, 0.0, 6)
        if rollout_policy is not None:
            p.set_rollout_policy(rollout_policy)
        _, obs = _after_bline_sleeps(p)
        a, greedy, k, _, rounds = p.decide(obs)[:5]
        return p.last_estimates(k, rounds)
    c0, v0 = estimates(None)
    c1, v1 = estimates(_policy(seed=5))
    c2, v2 = estimates(_truth_policy(8))
    assert np.array_equal(c0, c1) and np.array_equal(v0, v1)
    assert np.array_equal(c0, c2) and not np.allclose(v0, v2)


def test_copy_memory_from():
    """A planner consulted only on the last step, given the memory of one that saw every step,
    ranks the same candidates as that one; without it, it ranks them from an empty memory."""
    pol = _policy(seed=9)
    a = Planner(pol, 50, 4, 2, 3, 0.0, 1)
    sim = Cage2Sim(1, "RedMeanderAgent")
    obs, _ = sim.reset(0, 17)
    a.reset(7, False, 0)
    for _t in range(25):
        act = a.decide(obs)[0]
        obs = sim.step(0, act)[0]
        a.observe(act, obs)
    ranked = {}
    for copy in (True, False):
        b = Planner(pol, 50, 4, 2, 3, 0.0, 1)
        b.reset(7, False, 0)
        if copy:
            b.copy_memory_from(a)
        ranked[copy] = b.last_estimates(b.decide(obs)[2], 0)[0]
    mine = a.last_estimates(a.decide(obs)[2], 0)[0]
    assert np.array_equal(ranked[True], mine)
    assert not np.array_equal(ranked[False], mine)


def test_cage2_evaluation_reports_the_search():
    """A planned CAGE2 evaluation reports per setting the decision times and the search's
    switch, time-out and fallback rates, from the counters of every chunk: no switch with one
    candidate, some with four."""
    from wfrl.evaluation.cage2 import cage2_evaluate
    rates = {}
    for k in (1, 4):
        res = cage2_evaluate({"all": "pretrained:critical_first"}, episodes=6,
                             reds=("RedMeanderAgent",), lengths=(30,), n_workers=1,
                             plan=(PlanBudget(particles=200, candidates=k, rollouts=16, depth=8,
                                              time_ms=0.0), "known"))
        row = res["settings"][0]
        t = row["decision_ms"]
        assert 0 < t["median"] <= t["p95"] <= t["max"]
        rates[k] = row["search"]
        assert rates[k]["timeout_rate"] == 0.0 and 0.0 <= rates[k]["fallback_rate"] < 0.1
    assert rates[1]["switch_rate"] == 0.0 and rates[4]["switch_rate"] > 0.0


def test_hold_keeps_the_greedy_fix_out_of_the_alternatives_rollouts():
    """With hold and a Restore as the greedy action, the alternatives' rollouts (a policy that
    would restore at every step) change and the greedy action's do not; with a non-fix greedy
    action hold changes nothing."""
    def estimates(ranked, hold):
        p = Planner(_policy(_bias(*ranked), mask=False), 100, len(ranked), 6, 5, 0.0, 3)
        p.set_hold(hold)
        _, obs = _after_bline_sleeps(p)
        a, greedy, k, _, rounds = p.decide(obs)[:5]
        assert greedy == ranked[0]
        return p.last_estimates(k, rounds)[1]
    fix_first = (RESTORE + ENT0, 0, REMOVE + ENT0)
    off, on = estimates(fix_first, False), estimates(fix_first, True)
    assert np.array_equal(off[0], on[0]) and not np.array_equal(off[1:], on[1:])
    sleep_first = (0, RESTORE + ENT0, REMOVE + ENT0)
    assert np.array_equal(estimates(sleep_first, False), estimates(sleep_first, True))
