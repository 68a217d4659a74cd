"""WorkflowOptimizer: ask/tell, resume, the feasibility model, the constrained and the original
acquisition, the tie statement; planted ground truths."""
import json
import math

import numpy as np
import pytest
from _helpers import run_wfrl

from wfrl.errors import UserError
from wfrl.search.gp import ALL_EMBEDDED, PAIRS, discordant_pairs
from wfrl.search.optimizer import WorkflowOptimizer, original_scores
from wfrl.search.planted import planted_instance, run_one
from wfrl.workflow import UNIT_TYPES, Workflow

U, E = UNIT_TYPES.index("user"), UNIT_TYPES.index("enterprise")


def user_first(w: int) -> bool:
    wf = Workflow.from_index(w)
    return wf.rank[U] < wf.rank[E]


def _drive(opt, n, reward, compliance, rng):
    for _ in range(n):
        w = opt.ask().index
        opt.tell(w, reward(w) + rng.normal(0, 0.5), 0.5, compliance(w))


def test_ask_tell_round_trip_and_resume_asks_the_same():
    rng = np.random.default_rng(0)
    opt = WorkflowOptimizer(seed=4)
    _drive(opt, 6, lambda w: -20.0 + 0.1 * w, lambda w: 0.9 if user_first(w) else 0.98, rng)
    state = json.loads(json.dumps(opt.state_dict()))  # JSON-serialisable
    twin = WorkflowOptimizer.from_state(state)
    assert twin.history == opt.history
    a, b = opt.posterior(), twin.posterior()
    np.testing.assert_allclose(a.mean, b.mean)
    np.testing.assert_allclose(a.p_feasible, b.p_feasible)
    assert [opt.ask().index for _ in range(1)] == [twin.ask().index for _ in range(1)]
    # the random acquisition's RNG is restored too
    r = WorkflowOptimizer("random", seed=1)
    for _ in range(3):
        r.tell(r.ask(), -10.0, 1.0, 0.99)
    r2 = WorkflowOptimizer.from_state(r.state_dict())
    assert [r.ask().index for _ in range(5)] == [r2.ask().index for _ in range(5)]


@pytest.mark.parametrize("bad", [{"kind": "x"}, {**WorkflowOptimizer().state_dict(), "version": 9},
                                 {**WorkflowOptimizer().state_dict(), "history": [{"w": 1}]}])
def test_bad_state_is_one_clear_error(bad):
    with pytest.raises(UserError, match="bad optimizer state"):
        WorkflowOptimizer.from_state(bad)


@pytest.mark.parametrize("kw,message", [
    (dict(acquisition="nope"), r"unknown acquisition 'nope' \(choose from constrained, ucb, random, "
                               r"original\)"),
    (dict(theta=1.5), r"θ must lie in \[0, 1\] \(got 1.5\)")])
def test_bad_settings_are_refused(kw, message):
    with pytest.raises(UserError, match=message):
        WorkflowOptimizer(**kw)


def test_tell_refuses_bad_numbers():
    opt = WorkflowOptimizer()
    for args, message in [
            ((3, float("nan"), 1.0, 0.9), r"reward must be finite \(got nan\)"),
            ((3, -1.0, -1.0, 0.9), r"reward_se must be a finite non-negative number \(got -1.0\)"),
            ((3, -1.0, 1.0, 1.2), r"compliance must lie in \[0, 1\] \(got 1.2\)"),
            (("no,such", -1.0, 1.0, 0.9), "unknown unit type 'no' in workflow")]:
        with pytest.raises(UserError, match=message):
            opt.tell(*args)
    assert opt.history == []


def test_feasibility_posterior_learns_a_pairwise_rule():
    """Visits below θ exactly where user comes before enterprise: P(feasible) separates the two
    halves of the 120, unvisited workflows included, and the relation is named."""
    opt = WorkflowOptimizer(seed=0)
    visited = list(range(0, 120, 7))
    for w in visited:
        opt.tell(w, -15.0, 0.5, 0.90 if user_first(w) else 0.985)
    p = opt.posterior().p_feasible
    mask = np.array([user_first(w) for w in range(120)])
    unvisited = np.array([w not in visited for w in range(120)])
    assert p[~mask & unvisited].mean() > 0.8 > 0.2 > p[mask & unvisited].mean()
    assert ((p >= 0.5) == ~mask).mean() >= 0.9
    top = opt.relations()[0]
    assert (top.first, top.second) == (U, E) and top.feasible == 0
    assert top.words().startswith(f"user before enterprise: 0 of {top.visits} visited reached θ")


def test_only_compliant_visits_feed_the_reward_model():
    opt = WorkflowOptimizer(seed=0)
    opt.tell(5, -10.0, 0.5, 0.99)
    opt.tell(90, -99.0, 0.5, 0.50)  # below θ: its reward must not pull the mean down
    assert [o["workflow"] for o in opt.feasible_observations()] == [5]
    assert opt.recommend() == 5
    assert opt.posterior().mean[5] == pytest.approx(-10.0, abs=0.5)


def test_constrained_acquisition_prefers_the_feasible_of_equal_reward():
    """Two workflows the reward model cannot tell apart; one sits among visits that reached θ, the
    other among visits that did not: the constrained acquisition scores the first higher, the
    reward-only one does not care."""
    a, b = 0, 119  # opposite orders
    near_a = [w for w in range(120) if 1 <= discordant_pairs(a, w) <= 2][:6]
    near_b = [w for w in range(120) if 1 <= discordant_pairs(b, w) <= 2][:6]
    scores = {}
    for acq in ("constrained", "ucb"):
        opt = WorkflowOptimizer(acq, seed=0, n_init=0)
        for w in near_a:
            opt.tell(w, -20.0, 1.0, 0.99)
        for w in near_b:
            opt.tell(w, None, 1.0, 0.80)
        for w in (40, 70):  # compliant far from both, same reward: the incumbent bar
            opt.tell(w, -20.0, 1.0, 0.99)
        s, parts = opt.scores()
        scores[acq] = s
        if acq == "constrained":
            assert parts["p_feasible"][a] > 0.9 > 0.1 > parts["p_feasible"][b]
    assert scores["constrained"][a] > 5 * scores["constrained"][b]
    # reward-only: b, far from every reward observation, is the more uncertain, so it wins
    assert scores["ucb"][b] >= scores["ucb"][a]


def test_original_acquisition_on_a_hand_computed_example():
    # observed: workflow 0 twice (first reward −10, then −30), workflow 1 once (−20); 119 once
    # below θ (no reward, but a visit)
    hist = [{"workflow": 0, "reward": -10.0, "se": 1.0, "compliance": 0.99},
            {"workflow": 1, "reward": -20.0, "se": 1.0, "compliance": 0.99},
            {"workflow": 0, "reward": -30.0, "se": 1.0, "compliance": 0.99},
            {"workflow": 119, "reward": -5.0, "se": 1.0, "compliance": 0.5}]
    ucb, mean, sd = original_scores(hist, 0.95, 2.0)
    # observed: first reward; sd 1/(1+visits); UCB = mean + β/(1+0.5·visits)·sd
    assert mean[0] == -10.0 and sd[0] == pytest.approx(1 / 3)
    assert ucb[0] == pytest.approx(-10.0 + 2.0 / 2.0 * (1 / 3))
    assert mean[1] == -20.0 and ucb[1] == pytest.approx(-20.0 + 2.0 / 1.5 * 0.5)
    # unobserved w: weights exp(−2·d/10) over the observed 0 and 1; sd = 10·min d/10 + 1
    w = 119
    d0, d1 = discordant_pairs(w, 0) / 10, discordant_pairs(w, 1) / 10
    w0, w1 = math.exp(-2 * d0), math.exp(-2 * d1)
    m = (w0 * -10.0 + w1 * -20.0) / (w0 + w1)
    s = 10 * min(d0, d1) + 1
    assert mean[w] == pytest.approx(m) and sd[w] == pytest.approx(s)
    assert ucb[w] == pytest.approx(m + 2.0 / (1 + 0.5 * 1) * s)  # one (infeasible) visit
    w = 60
    d0, d1 = discordant_pairs(w, 0) / 10, discordant_pairs(w, 1) / 10
    w0, w1 = math.exp(-2 * d0), math.exp(-2 * d1)
    assert ucb[w] == pytest.approx((w0 * -10 + w1 * -20) / (w0 + w1) + 2.0 * (10 * min(d0, d1) + 1))
    # before any observation every workflow ties (the first pick is random)
    assert np.all(original_scores([], 0.95)[0] == 0.0)


def _tie_report(effect: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    opt = WorkflowOptimizer(seed=seed)
    for w in rng.choice(120, 40, replace=False):
        # an effect: "op_server first" is worth `effect`
        r = -20.0 + effect * (Workflow.from_index(int(w)).order[0] == UNIT_TYPES.index("op_server"))
        opt.tell(int(w), r + rng.normal(0, 1.0), 1.0, 0.99)
    return opt.report()


def test_tie_statement_without_an_effect():
    rep = _tie_report(0.0)
    assert rep.sentence.startswith("No workflow is distinguishable from the best")
    assert len(rep.indistinguishable) == rep.predicted_feasible - 1
    assert max(rep.p_best.values()) < 0.5


def test_tie_statement_with_an_effect():
    rep = _tie_report(8.0)
    assert not rep.sentence.startswith("No workflow")
    first = UNIT_TYPES.index("op_server")
    assert Workflow.from_index(rep.best).order[0] == first
    # worse at 95 %: exactly the evaluated workflows without op_server first (8 worse, in truth);
    # no op_server-first one, and no workflow that was never measured, however sure the model
    worse = set(range(120)) - set(rep.indistinguishable) - {rep.best}
    evaluated = set(rep.candidates)
    assert worse == {w for w in evaluated if Workflow.from_index(w).order[0] != first}
    assert len(worse) >= 25
    assert f"{len(worse)} of the other {len(evaluated) - 1} evaluated workflows are worse" \
        in rep.sentence
    assert abs(sum(rep.p_best.values()) - 1.0) < 1e-9


def test_planted_instances_are_sized_like_the_real_data():
    for i in range(5):
        inst = planted_instance(i)
        assert 30 <= inst.feasible.sum() <= 90
        assert 1.0 <= inst.noise_se <= 3.0
        f = inst.reward[inst.feasible]
        assert f.max() - np.median(f) == pytest.approx(inst.spread) and 3 <= inst.spread <= 10
        for t, s in inst.forbidden:  # feasibility is exactly the order constraints
            k = PAIRS.index((min(t, s), max(t, s)))
            sign = 1.0 if t < s else -1.0
            assert not inst.feasible[ALL_EMBEDDED[:, k] == sign].any()
        assert inst.feasible_rank()[inst.best()] == 1


def test_constrained_search_avoids_infeasible_workflows_on_a_planted_problem():
    inst = planted_instance(0)
    res = [run_one(inst, "constrained", s, 12, (12,)) for s in range(2)]
    rnd = [run_one(inst, "random", s, 12, (12,)) for s in range(2)]
    assert np.mean([r["infeasible_share_after_5"] for r in res]) < \
        np.mean([r["infeasible_share_after_5"] for r in rnd])
    assert all(r["max_visits_share"] <= 0.5 for r in res)


def test_acquisition_spreads_visits_where_one_shared_model_re_measured_one_workflow(monkeypatch):
    """Planted instance 4, seed 12: with the reward model of the report also steering the search
    (and the P(feasible) floor switched on by the one workflow seen feasible), 12 of the first 15
    evaluations went to workflow 78 (rank 19). The acquisition's own reward model (length scale
    <= 4, signal variance >= 1) with the floor rule "new" spreads them and reports a top-5
    workflow. The feasibility model is held at the one of that time (no shared offset,
    FEAS_BIAS): the test isolates the acquisition's reward model and floor rule; the offset's own
    effect on this seed's path is measured with the rest in the planted benchmark."""
    import wfrl.search.optimizer as optimizer
    monkeypatch.setattr(optimizer, "FEAS_BIAS", None)
    inst = planted_instance(4)
    new = run_one(inst, "constrained", 12, 15, (15,))
    assert np.bincount(new["picks"]).max() <= 15 // 3
    assert new["ranks"][15] <= 5
    monkeypatch.setattr(optimizer, "ACQ_REWARD_MAX_LENGTH_SCALE", optimizer.REWARD_MAX_LENGTH_SCALE)
    monkeypatch.setattr(optimizer, "ACQ_REWARD_MIN_SIGNAL", optimizer.REWARD_MIN_SIGNAL)
    monkeypatch.setattr(optimizer, "PF_FLOOR_RULE", "any")
    old = run_one(inst, "constrained", 12, 15, (15,))
    assert np.bincount(old["picks"]).max() >= 10 and old["ranks"][15] > 5


def test_a_search_state_of_the_first_format_is_refused_in_one_line(tmp_path):
    import torch
    run = tmp_path / "old"
    run.mkdir()
    (run / "experiment_config.json").write_text(json.dumps(
        {"mode": "search", "total_episodes": 100, "out": str(run)}))
    torch.save({"format": "wfrl/search-state", "format_version": 1, "meta": "{}",
                "learner": None}, run / "search_state.pt")
    p = run_wfrl("train", "--resume", run)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "older wfrl" in lines[0] and "Traceback" not in p.stderr


def test_feasibility_posterior_keeps_two_followable_sides_of_a_relation_followable(monkeypatch):
    """Both sides of a relation above θ, one far above (0.998), one just above (0.967), as on the
    recipe's ground truth: every workflow, unvisited ones included, is predicted feasible. Without
    the learned offset (FEAS_BIAS) the ±1 relation coordinate centres the two sides on θ and
    the near side is predicted unfollowable — the second half checks the test sees that."""
    import wfrl.search.optimizer as optimizer
    visited = list(range(0, 120, 8))

    def predicted(bias):
        monkeypatch.setattr(optimizer, "FEAS_BIAS", bias)
        opt = WorkflowOptimizer(seed=0)
        for i, w in enumerate(visited):
            opt.tell(w, -15.0, 0.5, (0.967 if user_first(w) else 0.998) + 0.002 * (i % 3 - 1))
        return opt.posterior().p_feasible >= 0.5

    assert predicted(optimizer.FEAS_BIAS).all()
    assert not predicted(None).all()


# The visits of a default search on the leaderboard code's simulator (workflow id, reward, se,
# compliance), made before the feasibility model's ceiling and local RBF: the followable class
# "user before enterprise" measured 0.967–0.975, the other 0.989–0.999, and the model of that
# time predicted 25 workflows of the first class unfollowable (one as low as 0.02).
RECORDED_VISITS = [
    (52, -13.4035, 0.3301, 0.9668), (82, -13.0757, 0.2649, 0.9979),
    (14, -15.5335, 0.6537, 0.989), (92, -14.0817, 0.4051, 0.9751),
    (40, -13.7303, 0.4444, 0.9973), (83, -12.7705, 0.252, 0.9973),
    (81, -12.953, 0.2802, 0.9992), (35, -13.1773, 0.2636, 0.9985),
    (63, -12.8183, 0.2773, 0.998), (113, -13.374, 0.2914, 0.9702),
    (44, -13.1335, 0.3119, 0.9958), (32, -13.3493, 0.3012, 0.9964),
    (57, -13.1163, 0.2702, 0.999), (47, -13.1605, 0.2815, 0.9965),
    (64, -14.5083, 0.3464, 0.9725),
]


def test_feasibility_model_keeps_a_class_near_theta_followable_on_recorded_visits(monkeypatch):
    """Every visit above θ, so every workflow is predicted feasible; with the model's earlier
    ceiling (0.999) and RBF length scale (3) the same visits give unfollowable predictions — the
    second half checks the test sees the difference."""
    import wfrl.search.optimizer as optimizer

    def n_unfollowable():
        opt = WorkflowOptimizer(seed=7)
        for w, r, se, c in RECORDED_VISITS:
            opt.tell(w, r, se, c)
        return int((opt.posterior().p_feasible < 0.5).sum())

    assert n_unfollowable() == 0
    monkeypatch.setattr(optimizer, "CEILING_FRACTION", 0.0)
    monkeypatch.setattr(optimizer, "FEAS_MAX_LENGTH_SCALE", 3.0)
    assert n_unfollowable() > 10


# The visits of a default search on the leaderboard code's simulator (seed 11, a base still far
# from converged): its user-before-enterprise visits measured 0.934–0.964, where the ground
# truth's five runs put that class at 0.975; the search called 59 workflows unfollowable.
AT_THETA_VISITS = [
    (41, -14.852, 0.3112, 0.9988), (11, -14.608, 0.2928, 0.9336), (69, -14.9597, 0.319, 0.9432),
    (13, -15.3407, 0.3828, 0.9983), (47, -14.744, 0.2847, 0.9985), (104, -14.9575, 0.2905, 0.9469),
    (119, -14.5463, 0.321, 0.9642), (58, -14.7383, 0.2979, 0.9985), (62, -14.4002, 0.3155, 0.9999),
    (60, -15.175, 0.3092, 0.9998), (119, -14.3645, 0.2564, 0.9506), (87, -14.8223, 0.3381, 0.998),
    (119, -15.0335, 0.2703, 0.9405), (25, -13.7707, 0.2755, 0.9988), (24, -15.2055, 0.4252, 0.9984),
]


def test_workflows_called_unfollowable_near_theta_are_counted_at_theta_but_far_below_are_not():
    """The feasible set is P(feasible) ≥ 0.5; of the rest, those not SURE_LEVEL sure to fall
    short of θ are "at θ". Visits of a class just below θ (the recorded search above): dozens
    called unfollowable, every one of them at θ. The same visits with that class's compliance
    set far below θ (0.85): exactly that class unfollowable, and none of it at θ."""
    def fitted(visits):
        opt = WorkflowOptimizer(seed=11)
        for w, r, se, c in visits:
            opt.tell(w, r, se, c)
        return opt

    first = np.array([user_first(w) for w in range(120)])
    near = fitted(AT_THETA_VISITS)
    out = ~near.predicted_feasible()
    assert out.sum() > 30 and not out[~first].any()
    assert (near.at_theta() == out).all()
    assert near.report().predicted_feasible == 120 - out.sum()
    far = fitted([(w, r, se, 0.85 if user_first(w) else c) for w, r, se, c in AT_THETA_VISITS])
    assert (far.predicted_feasible() == ~first).all()
    assert not far.at_theta().any()


def test_compliance_ceiling():
    from wfrl.search.optimizer import COMPLIANCE_CLIP, compliance_ceiling, logit
    assert compliance_ceiling(0.95) == pytest.approx(0.99)
    thetas = np.linspace(0.0, 0.998, 50)
    tops = [compliance_ceiling(t) for t in thetas]
    assert all(t < top <= COMPLIANCE_CLIP[1] for t, top in zip(thetas, tops))
    assert all(a <= b for a, b in zip(tops, tops[1:]))
    assert compliance_ceiling(1.0) == COMPLIANCE_CLIP[1]
    assert logit(0.999, 0.99) == pytest.approx(logit(0.99)) and logit(0.97, 0.99) < logit(0.99)


# ------------------------------------------------------------------ pending visits (batches)
def _told(n=8, seed=0):
    opt = WorkflowOptimizer(seed=seed)
    inst = planted_instance(seed)
    noise = np.random.default_rng(seed)
    for _ in range(n):
        w = opt.ask().index
        opt.tell(w, *inst.observe(w, noise))
    return opt


def test_no_pending_visit_asks_as_before():
    a, b = _told(), _told()
    assert a.ask(pending=[]).index == b.ask().index
    assert a.last_ask == b.last_ask


def test_predict_given_is_a_refit_with_the_hyperparameters_kept():
    """The believed posterior equals scikit-learn's GP refitted, kernel fixed, on the told data
    plus an observation at the posterior mean of each pending workflow."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    from wfrl.search.gp import embed
    opt = _told(10)
    reward, _ = opt.models()
    pending = [3, 57, 101]
    mu, sd = reward.predict(observation=True)
    mu_b, sd_b = reward.predict_given(pending, 0.7, observation=True)
    gpr = reward.gpr
    z_p = (mu[pending] - reward.y_mean) / reward.y_std
    alpha = np.concatenate([np.broadcast_to(gpr.alpha, (len(gpr.X_train_),)),
                            np.full(3, (0.7 / reward.y_std) ** 2 + 1e-8)])
    ref = GaussianProcessRegressor(gpr.kernel_, alpha=alpha, optimizer=None, normalize_y=False)
    ref.fit(np.vstack([gpr.X_train_, embed(pending)]), np.concatenate([gpr.y_train_, z_p]))
    m_ref, s_ref = ref.predict(ALL_EMBEDDED, return_std=True)
    assert np.allclose(mu_b, m_ref * reward.y_std + reward.y_mean, atol=1e-6)
    assert np.allclose(mu_b, mu)                       # the mean does not move
    assert np.allclose(sd_b, s_ref * reward.y_std, atol=1e-6)
    assert np.all(sd_b <= sd + 1e-9) and np.all(sd_b[pending] < sd[pending] - 1e-3)


def test_pending_visits_spread_a_batch():
    """With the asked workflow pending, the next ask differs from it (its spread is believed
    away), and every member of a batch of 4 differs from the others."""
    opt = _told(8)
    first = opt.ask().index
    second = opt.ask(pending=[first]).index
    assert second != first
    batch = []
    for _ in range(4):
        batch.append(opt.ask(pending=batch).index)
    assert len(set(batch)) == 4
    # the design phase and the random rule treat pending workflows as told
    fresh = WorkflowOptimizer(seed=1)
    design = []
    for _ in range(3):
        design.append(fresh.ask(pending=design).index)
    assert len(set(design)) == 3
    rnd = WorkflowOptimizer("random", seed=1)
    picks = []
    for _ in range(10):
        picks.append(rnd.ask(pending=picks).index)
    assert len(set(picks)) == 10


def test_batched_planted_run_tells_in_order_and_batch_one_is_serial():
    inst = planted_instance(2)
    serial = run_one(inst, "constrained", 0, 10, (5, 10))
    one = run_one(inst, "constrained", 0, 10, (5, 10), batch=1)
    assert serial["picks"] == one["picks"] and serial["ranks"] == one["ranks"]
    four = run_one(inst, "constrained", 0, 10, (5, 10), batch=4)
    assert len(four["picks"]) == 10 and four["picks"] != serial["picks"]
