"""The workflow search: the GP over permutations, UCB, the compliance-gated loop, its records, and
resuming after a kill."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from wfrl.config import SearchConfig
from wfrl.errors import UserError
from wfrl.ppo.learner import PPOConfig
from wfrl.protocol import TIMING_COLUMNS
from wfrl.runlog import read_csv
from wfrl.search import gp
from wfrl.search.loop import WorkflowSearch, closest_trained, search
from wfrl.workflow import Workflow, all_workflows, kendall_distance

ALL = list(range(120))


# ------------------------------------------------------------------------------- kernel / GP
def test_discordant_pairs_is_kendall_distance():
    wfs = all_workflows()
    rng = np.random.default_rng(0)
    for a, b in rng.integers(0, 120, size=(300, 2)):
        assert gp.discordant_pairs(a, b) == round(10 * kendall_distance(wfs[a], wfs[b]))
    assert gp.discordant_pairs(0, 119) == 10  # reversed order


@pytest.mark.parametrize("ell", [0.05, 0.3, 1.0, 3.0])
def test_mallows_kernel_is_psd_and_equals_rbf_on_embedding(ell):
    from sklearn.gaussian_process.kernels import RBF
    K = gp.mallows_kernel(ALL, ALL, s2=2.5, ell=ell)
    assert np.allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-9
    rbf = 2.5 * RBF(gp.rbf_length_scale(ell))(gp.ALL_EMBEDDED)
    np.testing.assert_allclose(K, rbf, rtol=1e-12, atol=1e-12)
    # The embedding is ±1 with one coordinate per type pair, and distinct per workflow.
    assert gp.ALL_EMBEDDED.shape == (120, 10)
    assert len({tuple(r) for r in gp.ALL_EMBEDDED}) == 120


def test_posterior_interpolates_noise_free_observations():
    idx = [0, 7, 33, 64, 101, 119]
    y = np.array([-40.0, -55.0, -38.0, -70.0, -61.0, -45.0])
    model = gp.PermutationGP(optimize=False, length_scale=2.0, noise=1e-9).fit(idx, y)
    mu, sd = model.predict(idx)
    np.testing.assert_allclose(mu, y, atol=1e-3)
    assert sd.max() < 1e-2
    _, sd_all = model.predict()
    far = [i for i in ALL if min(gp.discordant_pairs(i, j) for j in idx) >= 3]
    assert far and sd_all[far].min() > 10 * sd.max()  # uncertainty away from the data


def test_repeated_observations_are_noisy_not_ignored():
    """Two different rewards for one workflow: the posterior sits between them, and a third
    observation moves it."""
    model = gp.PermutationGP(optimize=False, noise=0.05)
    mu2 = model.fit([5, 5, 90], [-50.0, -40.0, -80.0], [1.0, 1.0, 1.0]).predict([5])[0][0]
    assert -50.0 < mu2 < -40.0
    mu3 = model.fit([5, 5, 5, 90], [-50.0, -40.0, -40.0, -80.0], [1.0] * 4).predict([5])[0][0]
    assert mu3 > mu2


def test_ucb_explores_with_large_beta_and_exploits_with_zero():
    # Observations clustered around workflow 0 (the identity order); the best is at 1.
    near = [0, 1, 2, 6]
    y = [-50.0, -30.0, -45.0, -48.0]
    # the RBF (Mallows) part alone: its sd grows with the Kendall distance to the data
    model = gp.PermutationGP(optimize=False, length_scale=2.0, noise=1e-4,
                             linear=False).fit(near, y)
    mu, sd = model.predict()
    rng = np.random.default_rng(0)
    exploit = gp.argmax_ucb(gp.ucb_scores(mu, sd, 0.0), rng)
    assert exploit == 1
    explore = gp.argmax_ucb(gp.ucb_scores(mu, sd, 1e6), rng)
    assert explore not in near
    dist = min(gp.discordant_pairs(explore, j) for j in near)
    assert dist == max(min(gp.discordant_pairs(i, j) for j in near) for i in ALL)


def test_detrending_separates_training_length_from_the_workflow():
    """Later observations come from longer-trained policies: +20 reward per unit of log lineage.
    Raw, the GP credits the latest workflow; detrended, it finds the truly best one."""
    from wfrl.search.loop import fit_observations
    rng = np.random.default_rng(1)
    wfs = [3, 40, 77, 101, 8, 60, 119, 25]
    f = dict(zip(wfs, [-42.0, -45.0, -36.0, -44.0, -41.0, -46.0, -43.0, -40.0]))
    best = max(wfs, key=f.get)
    obs = []
    for i, w in enumerate(wfs):
        lineage = 10_000 + 1_500 * i
        obs.append({"workflow": w, "se": 0.3, "lineage": lineage,
                    "reward": f[w] + 20.0 * np.log1p(lineage) + rng.normal(0, 0.3)})
    mu_raw, _ = fit_observations(gp.PermutationGP(optimize=False), obs, False).predict()
    model = gp.PermutationGP(optimize=False)
    mu, _ = fit_observations(model, obs, True).predict()
    assert max(wfs, key=lambda w: mu[w]) == best
    assert max(wfs, key=lambda w: mu_raw[w]) != best
    assert model.trend == pytest.approx(20.0, rel=0.25)


def test_beta_schedule_grows_slowly():
    b = [gp.beta_schedule(t) for t in (1, 2, 10, 20)]
    assert all(x < y for x, y in zip(b, b[1:]))
    assert 1.5 < np.sqrt(b[0]) < 2.0 and np.sqrt(b[-1]) < 2.5


def test_closest_trained_workflow():
    wf = Workflow.parse("op_server,enterprise,defender,op_host,user").index
    trained = {Workflow.parse("user,op_host,defender,enterprise,op_server").index: 1,   # d = 10
               Workflow.parse("op_server,enterprise,defender,user,op_host").index: 1,   # d = 1
               Workflow.parse("enterprise,op_server,defender,user,op_host").index: 1}   # d = 2
    assert closest_trained(wf, trained) == Workflow.parse(
        "op_server,enterprise,defender,user,op_host").index
    assert closest_trained(wf, {}) is None
    assert closest_trained(wf, {wf: 5, **trained}) == wf


# ------------------------------------------------------------------------------- the loop
# The recipe's learner (what `wfrl train` uses by default), small and quick.
PPO = PPOConfig(hidden=32, epochs=2, memory=True, mask=True)


def _cfg(out, **kw):
    base = dict(total_episodes=1000, max_episodes=300, min_episodes=100, episodes_per_update=50,
                pretrain_episodes=100,
                compliance_threshold=0.25, patience=4, collector="sequential", seed=3,
                inherit="closest", out=str(out), ppo=PPO)
    base.update(kw)
    return SearchConfig(**base)


def _quiet(_line):
    pass


def _comparable(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("search") / "run"
    summary = search(_cfg(out, total_episodes=730), progress=_quiet)
    return out, summary


def test_search_budget_records_and_inheritance(reference_run):
    out, summary = reference_run
    log = read_csv(out / "training_log.csv")
    gpl = read_csv(out / "gp_sampling_log.csv")
    assert summary["episodes_used"] == 730  # the budget, exactly: the last update is smaller
    assert int(log[-1]["Total_Episodes_Sampled"]) == 730
    per_update = np.diff([0] + [int(r["Total_Episodes_Sampled"]) for r in log])
    assert per_update.max() <= 50 and per_update.sum() == 730
    # one gp row per visit; a visit never exceeds max_episodes
    assert len(gpl) == summary["visits"] >= 3
    assert any(r["GP_Updated"] == "True" for r in gpl)
    assert all(int(r["Episodes_Trained"]) <= 300 for r in gpl)
    assert [int(r["Iteration"]) for r in gpl] == list(range(1, len(gpl) + 1))
    # GP_Updated exactly when the final compliance reached θ — unless the budget cut the visit
    # short of its minimum (then it is not given to either model)
    for r in gpl:
        complete = int(r["Episodes_Trained"]) >= 100
        assert (r["GP_Updated"] == "True") == (complete and float(r["Final_Compliance"]) >= 0.25)
    # pretraining first (100 episodes = 2 updates on random workflows), then the visits
    assert [r["Phase"] for r in log[:3]] == ["pretrain", "pretrain", "visit"]
    assert (out / "checkpoints" / "base.pt").is_file()
    # inheritance: visit k starts from the closest workflow trained in visits < k (the first
    # from the pretrained base)
    trained = set()
    for r in gpl:
        w = int(r["Workflow_ID"])
        expect = closest_trained(w, trained)
        got = r["Inherited_From"]
        assert got == ("base" if expect is None else str(Workflow.from_index(expect)))
        trained.add(w)
    for w in trained:
        assert (out / "checkpoints" / f"wf_{w:03d}.pt").is_file()
    for png in ("learning_curves.png", "search_posterior.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    s = json.loads((out / "summary.json").read_text())
    cfg = json.loads((out / "experiment_config.json").read_text())
    assert cfg["mode"] == "search" and cfg["total_episodes"] == 730
    if s["best_workflow"] is not None:
        assert s["best_workflow"] in {r["Workflow"] for r in gpl if r["GP_Updated"] == "True"}


def test_inherit_base_starts_every_new_workflow_from_the_base(tmp_path):
    summary = search(_cfg(tmp_path / "run", total_episodes=500, inherit="base"), progress=_quiet)
    gpl = read_csv(tmp_path / "run" / "gp_sampling_log.csv")
    assert summary["visits"] == len(gpl) >= 2
    seen = set()
    for r in gpl:
        own = r["Workflow"] in seen
        assert r["Inherited_From"] == (r["Workflow"] if own else "base")
        # lineage = pretraining + every episode this workflow trained so far
        seen.add(r["Workflow"])
    first = gpl[0]
    assert int(first["Lineage_Episodes"]) == 100 + int(first["Episodes_Trained"])


@pytest.mark.parametrize("die_at", [1, 8])  # during pretraining / during a visit
def test_resume_after_crash_between_log_and_commit(tmp_path, reference_run, monkeypatch, die_at):
    """The process dies after an update's log row was written but before the state commit: the
    resumed run drops that row, redoes the update and ends identical to the uninterrupted one."""
    ref_out, ref_summary = reference_run
    out = tmp_path / "run"
    real = WorkflowSearch._commit

    def dying_commit(self, learner):
        if self.state.training_log_rows == die_at:  # row logged, about to be committed
            raise KeyboardInterrupt  # as if killed here
        real(self, learner)

    monkeypatch.setattr(WorkflowSearch, "_commit", dying_commit)
    with pytest.raises(KeyboardInterrupt):
        search(_cfg(out, total_episodes=730), progress=_quiet)
    monkeypatch.setattr(WorkflowSearch, "_commit", real)
    from wfrl.search.state import load_state
    rows_before = len(read_csv(out / "training_log.csv"))
    committed = load_state(out / "search_state.pt")[0].training_log_rows
    assert (rows_before, committed) == (die_at, die_at - 1)  # row written, commit not
    summary = search(_resume_cfg(out), resume=True, progress=_quiet)
    assert _comparable(read_csv(out / "training_log.csv")) == \
        _comparable(read_csv(ref_out / "training_log.csv"))
    assert read_csv(out / "gp_sampling_log.csv") == read_csv(ref_out / "gp_sampling_log.csv")
    assert summary["episodes_used"] == ref_summary["episodes_used"]
    assert summary["top"] == ref_summary["top"]


def _resume_cfg(out):
    from wfrl.search.loop import resume_config
    return resume_config(str(out))


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path, reference_run):
    ref_out, ref_summary = reference_run
    out = tmp_path / "run"
    args = [sys.executable, "-m", "wfrl", "train", "--total-episodes", "730",
            "--max-episodes", "300", "--min-episodes", "100", "--episodes-per-update", "50",
            "--compliance-threshold", "0.25", "--patience", "4", "--collector", "sequential",
            "--pretrain-episodes", "100", "--inherit", "closest",
            "--seed", "3", "--hidden", "32", "--epochs", "2", "--out", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "training_log.csv"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) > 9:  # mid-search: ≥ 9 updates
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = subprocess.run([sys.executable, "-m", "wfrl", "train", "--resume", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming" in done.stderr
    assert _comparable(read_csv(out / "training_log.csv")) == \
        _comparable(read_csv(ref_out / "training_log.csv"))
    assert read_csv(out / "gp_sampling_log.csv") == read_csv(ref_out / "gp_sampling_log.csv")
    s = json.loads((out / "summary.json").read_text())
    assert s["episodes_used"] == ref_summary["episodes_used"] and s["top"] == ref_summary["top"]
    # resuming a finished run is refused in one line
    again = subprocess.run([sys.executable, "-m", "wfrl", "train", "--resume", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "has finished" in again.stderr
    assert "Traceback" not in again.stderr


class _Result:
    def __init__(self, returncode, stderr):
        self.returncode, self.stderr = returncode, stderr


def _cli(*args):
    """wfrl's main() in this process (a subprocess per case costs seconds of imports)."""
    import contextlib
    import io

    from wfrl.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(list(args))
    return _Result(code, err.getvalue())


@pytest.mark.parametrize("args, message", [
    (["train", "--resume", "/nonexistent/run"], "not a directory"),
    (["train", "--workflow", "balanced", "--max-episodes", "10"], "belongs to the workflow search"),
    (["train", "--beta", "-1", "--out", "{tmp}/x"], "--beta must be non-negative"),
    (["train", "--beta", "lots"], "expected a number"),
    (["train", "--patience", "0", "--out", "{tmp}/x"], "--patience must be positive"),
    (["train", "--collector", "bogus", "--out", "{tmp}/x"], "unknown collector"),
    (["exhaustive", "--red-agent", "Nobody", "--out", "{tmp}/x"], "unknown red agent"),
    (["exhaustive", "--protocol", "bogus", "--out", "{tmp}/x"], "unknown protocol"),
    (["exhaustive", "--protocol", "conditioned", "--pretrain-episodes", "0", "--out", "{tmp}/x"],
     "needs --pretrain-episodes > 0"),
    (["train", "--acquisition", "thompson", "--out", "{tmp}/x"], "unknown acquisition"),
    (["train", "--workflow", "balanced", "--acquisition", "random"], "belongs to the workflow"),
])
def test_cli_errors_are_one_line(tmp_path, args, message):
    r = _cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_resume_refuses_changed_settings_and_damaged_state(tmp_path, reference_run):
    ref_out, _ = reference_run
    r = _cli("train", "--resume", str(ref_out), "--seed", "4")
    assert r.returncode == 2 and "--seed cannot be changed" in r.stderr
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for f in ("experiment_config.json", "training_log.csv", "gp_sampling_log.csv"):
        (damaged / f).write_bytes((Path(ref_out) / f).read_bytes())
    state = (Path(ref_out) / "search_state.pt").read_bytes()
    (damaged / "search_state.pt").write_bytes(state[: len(state) // 2])
    before = {f: (damaged / f).read_bytes() for f in ("training_log.csv", "gp_sampling_log.csv")}
    r = _cli("train", "--resume", str(damaged))
    assert r.returncode == 2 and "damaged" in r.stderr and "Traceback" not in r.stderr
    assert before == {f: (damaged / f).read_bytes() for f in before}  # nothing touched
    (damaged / "experiment_config.json").write_text("{not json")
    r = _cli("train", "--resume", str(damaged))
    assert r.returncode == 2 and "not JSON" in r.stderr


def test_existing_run_is_not_overwritten(reference_run):
    ref_out, _ = reference_run
    before = (ref_out / "training_log.csv").read_bytes()
    with pytest.raises(UserError, match="already holds a run"):
        WorkflowSearch(_cfg(ref_out))
    assert (ref_out / "training_log.csv").read_bytes() == before


def test_exhaustive_repeats_combine_and_continue(tmp_path):
    from wfrl.search.exhaustive import ExhaustiveConfig, exhaustive, load_exhaustive
    cfg = ExhaustiveConfig(pretrain_episodes=4, episodes_per_workflow=2, episodes_per_update=2,
                           eval_episodes=3, repeats=2, out=str(tmp_path / "ex"),
                           ppo=PPOConfig(hidden=8, epochs=1, minibatches=1))
    path = exhaustive(cfg, progress=_quiet)
    rows = load_exhaustive(path)
    assert sorted(r["Workflow_ID"] for r in rows) == ALL
    assert sorted(r["Rank"] for r in rows) == list(range(1, 121))
    runs = [{r["Workflow_ID"]: r for r in load_exhaustive(tmp_path / "ex" / f"seed{s}" /
                                                             "exhaustive.csv")} for s in (0, 1)]
    for r in rows:
        pair = np.array([t[r["Workflow_ID"]]["Reward"] for t in runs])
        assert r["Reward"] == pytest.approx(pair.mean(), abs=1e-3)
        assert r["Reward_SE"] == pytest.approx(pair.std(ddof=1) / np.sqrt(2), abs=1e-3)
    # an interrupted run is continued, not redone: drop 5 rows of one run and start again
    one = tmp_path / "ex" / "seed1" / "exhaustive.csv"
    lines = one.read_text().splitlines(keepends=True)
    kept = {r["Workflow_ID"]: r["Reward"] for r in runs[1].values()}
    one.write_text("".join(lines[:-5]))
    exhaustive(cfg, progress=_quiet)
    again = {r["Workflow_ID"]: r["Reward"] for r in load_exhaustive(one)}
    assert again == kept  # same seeds → the 5 redone workflows come out the same
    # a table is only continued under the protocol it was started with
    from dataclasses import replace
    with pytest.raises(UserError, match="episodes_per_workflow"):
        exhaustive(replace(cfg, episodes_per_workflow=4), progress=_quiet)


def test_resume_at_the_end_of_a_partial_pretraining_update(tmp_path, monkeypatch):
    """Pretraining of 130 episodes in updates of 50 ends with a 30-episode update; a crash right
    after it (before the base is committed) resumes without redoing or breaking anything."""
    real = WorkflowSearch._commit

    def dying_commit(self, learner):
        if self.state.pretraining.episodes == 130 and learner is None:  # base saved, not committed
            raise KeyboardInterrupt
        real(self, learner)

    out = tmp_path / "run"
    monkeypatch.setattr(WorkflowSearch, "_commit", dying_commit)
    with pytest.raises(KeyboardInterrupt):
        search(_cfg(out, total_episodes=400, pretrain_episodes=130), progress=_quiet)
    monkeypatch.setattr(WorkflowSearch, "_commit", real)
    summary = search(_resume_cfg(out), resume=True, progress=_quiet)
    ref = search(_cfg(tmp_path / "ref", total_episodes=400, pretrain_episodes=130),
                 progress=_quiet)
    assert summary["episodes_used"] == ref["episodes_used"] == 400
    assert _comparable(read_csv(out / "training_log.csv")) == \
        _comparable(read_csv(tmp_path / "ref" / "training_log.csv"))


def test_killed_after_summary_before_final_commit_is_resumable(tmp_path, monkeypatch):
    real = WorkflowSearch._commit

    def dying_commit(self, learner):
        if self.state.finished:
            raise KeyboardInterrupt
        real(self, learner)

    out = tmp_path / "run"
    monkeypatch.setattr(WorkflowSearch, "_commit", dying_commit)
    with pytest.raises(KeyboardInterrupt):
        search(_cfg(out, total_episodes=300), progress=_quiet)
    monkeypatch.setattr(WorkflowSearch, "_commit", real)
    summary = search(_resume_cfg(out), resume=True, progress=_quiet)
    assert summary["episodes_used"] == 300
    assert json.loads((out / "summary.json").read_text())["episodes_used"] == 300


def test_gp_gets_no_observation_from_short_or_stub_visits(tmp_path):
    # θ = 0: every visit is "compliant" and stops at the first update past min_episodes (60):
    # 50 + 50. The budget cuts the third visit to 50 + 10: it trained its minimum, but its last
    # update is a 10-episode stub, so it is not an observation.
    search(_cfg(tmp_path / "run", total_episodes=360, max_episodes=150, min_episodes=60,
                compliance_threshold=0.0, pretrain_episodes=100), progress=_quiet)
    gpl = read_csv(tmp_path / "run" / "gp_sampling_log.csv")
    assert [(int(r["Episodes_Trained"]), r["GP_Updated"]) for r in gpl] == \
        [(100, "True"), (100, "True"), (60, "False")]
    # and a visit that stops before min_episodes is not one either
    search(_cfg(tmp_path / "run2", total_episodes=300, max_episodes=150, min_episodes=200,
                compliance_threshold=0.0, pretrain_episodes=100), progress=_quiet)
    assert {r["GP_Updated"] for r in read_csv(tmp_path / "run2" / "gp_sampling_log.csv")} == {"False"}


def test_auto_collector_also_trains_one_workflow(tmp_path):
    r = _cli("train", "--workflow", "balanced", "--collector", "auto", "--total-episodes", "4",
             "--episodes-per-update", "2", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "o" / "experiment_config.json").read_text())
    assert cfg["collector"] in ("async", "sequential")


def test_exhaustive_conditioned_protocol_evaluates_one_policy(tmp_path):
    """--protocol conditioned: one policy trained on random workflows (its base.pt), every
    workflow only evaluated — so an evaluation of base.pt conditioned on a workflow reproduces
    that workflow's row."""
    from dataclasses import replace

    from wfrl.collect.base import make_collector
    from wfrl.ppo.learner import PPOLearner
    from wfrl.rng import EVAL_EPISODE_BASE
    from wfrl.runlog import load_checkpoint
    from wfrl.search.exhaustive import ExhaustiveConfig, exhaustive, load_exhaustive
    ppo = PPOConfig(hidden=8, epochs=1, minibatches=1)
    cfg = ExhaustiveConfig(protocol="conditioned", pretrain_episodes=6, episodes_per_update=3,
                           eval_episodes=4, out=str(tmp_path / "ex"), seed=2, ppo=ppo)
    rows = {r["Workflow_ID"]: r for r in load_exhaustive(exhaustive(cfg, progress=_quiet))}
    assert sorted(rows) == ALL
    assert all(r["Episodes"] == "0" and r["Train_Reward"] == "" for r in rows.values())
    learner = PPOLearner(ppo, seed=0)
    learner.model.load_state_dict(load_checkpoint(tmp_path / "ex" / "base.pt")["model"])
    col = make_collector("sequential", "sim", "B_lineAgent", 8, 2, cfg.alignment_lambda, False,
                         1, 4)
    try:
        for w in (0, 57, 119):
            ev = col.collect(learner.flat_weights(), 1, Workflow.from_index(w),
                             EVAL_EPISODE_BASE, 4)
            assert rows[w]["Reward"] == pytest.approx(np.mean([e.env_return for e in ev]),
                                                      abs=1e-3)
    finally:
        col.close()
    assert ExhaustiveConfig(protocol="conditioned").resolved().pretrain_episodes == 40_000
    assert ExhaustiveConfig().resolved().pretrain_episodes == 10_000
    assert ExhaustiveConfig().validate().pretrain_episodes is None  # validate() changes nothing
    # a table from before --protocol existed (no "protocol" in its config) was a fine-tune table:
    # it is not continued as a conditioned one, even with a matching pretraining length
    ft = tmp_path / "old"
    exhaustive(replace(cfg, protocol="finetune", episodes_per_workflow=3, out=str(ft)),
               progress=_quiet)
    stored = json.loads((ft / "experiment_config.json").read_text())
    del stored["protocol"]
    (ft / "experiment_config.json").write_text(json.dumps(stored))
    lines = (ft / "exhaustive.csv").read_text().splitlines(keepends=True)
    (ft / "exhaustive.csv").write_text("".join(lines[:-3]))
    with pytest.raises(UserError, match="protocol"):
        exhaustive(replace(cfg, out=str(ft)), progress=_quiet)
    assert len((ft / "exhaustive.csv").read_text().splitlines()) == len(lines) - 3


def _anova_by_regression(y):
    """F for the workflow factor by comparing least-squares fits with and without workflow
    dummies (both with run dummies): the textbook definition, independent of the mean-squares
    shortcut in workflow_effect."""
    r, w = y.shape
    runs = np.kron(np.eye(r), np.ones((w, 1)))
    wfs = np.kron(np.ones((r, 1)), np.eye(w))[:, 1:]
    target = y.reshape(-1)

    def rss(X):
        beta, *_ = np.linalg.lstsq(X, target, rcond=None)
        return float(((target - X @ beta) ** 2).sum())

    full, reduced = rss(np.c_[runs, wfs]), rss(runs)
    df_w, df_e = w - 1, r * w - r - (w - 1)
    return ((reduced - full) / df_w) / (full / df_e)


def test_workflow_effect_detects_a_real_effect_and_not_noise():
    from wfrl.search.exhaustive import workflow_effect
    rng = np.random.default_rng(0)
    true = -5.0 * np.array([kendall_distance(Workflow.from_index(0), wf) for wf in all_workflows()])
    run_shift = rng.normal(0, 5, size=(4, 1))
    real = true + run_shift + rng.normal(0, 0.5, size=(4, 120))
    noise = run_shift + rng.normal(0, 2, size=(4, 120))
    e_real, e_noise = workflow_effect(real), workflow_effect(noise)
    assert e_real["F"] == pytest.approx(_anova_by_regression(real), rel=1e-3)
    assert e_noise["F"] == pytest.approx(_anova_by_regression(noise), rel=1e-3)
    assert e_real["p_value"] < 1e-6 and e_real["mean_spearman_between_runs"] > 0.6
    assert e_real["workflow_sd"] == pytest.approx(true.std(ddof=1), rel=0.1)
    assert e_noise["p_value"] > 0.01 and abs(e_noise["mean_spearman_between_runs"]) < 0.2
    assert e_real["friedman_p_value"] < 1e-6 and e_noise["friedman_p_value"] > 0.01
    # one wildly noisy run hides the effect from F but not from the within-run ranks
    wild = real.copy()
    wild[0] += rng.normal(0, 60, size=120)
    assert workflow_effect(wild)["p_value"] > workflow_effect(wild)["friedman_p_value"]
    assert workflow_effect(wild)["friedman_p_value"] < 1e-6
    assert e_noise["run_noise_sd"] == pytest.approx(2.0, rel=0.15)
    # no variation within runs (every workflow fully compliant): nothing to test, no fake effect
    for flat in (np.ones((4, 120)), np.full((4, 120), 0.9) + np.arange(4)[:, None]):
        e = workflow_effect(flat)
        assert e["F"] is None and e["p_value"] is None and e["friedman_p_value"] is None
        json.dumps(e, allow_nan=False)


def test_random_acquisition_visits_distinct_workflows_and_keeps_the_records(tmp_path):
    out = tmp_path / "run"
    summary = search(_cfg(out, total_episodes=700, acquisition="random", max_episodes=100),
                     progress=_quiet)
    gpl = read_csv(out / "gp_sampling_log.csv")
    ids = [int(r["Workflow_ID"]) for r in gpl]
    assert summary["visits"] == len(ids) >= 5 and len(set(ids)) == len(ids)
    again = search(_cfg(tmp_path / "again", total_episodes=700, acquisition="random",
                        max_episodes=100), progress=_quiet)
    assert [int(r["Workflow_ID"]) for r in read_csv(tmp_path / "again" / "gp_sampling_log.csv")] \
        == ids and again["episodes_used"] == summary["episodes_used"] == 700
    ucb = search(_cfg(tmp_path / "ucb", total_episodes=700, max_episodes=100), progress=_quiet)
    ucb_ids = [int(r["Workflow_ID"]) for r in read_csv(tmp_path / "ucb" / "gp_sampling_log.csv")]
    assert ucb["visits"] >= 5 and ucb_ids != ids


def test_quality_tables_ranks_against_the_ground_truth(tmp_path):
    """quality.tabulate on two tiny searches per acquisition and a synthetic ground truth: every
    reported rank is the truth's rank of the workflow best_after picks."""
    from wfrl.runlog import write_csv_atomic
    from wfrl.search import quality
    from wfrl.search.exhaustive import COMBINED_COLUMNS
    rng = np.random.default_rng(1)
    true = -10 * np.array([kendall_distance(Workflow.from_index(7), wf) for wf in all_workflows()],
                     dtype=float) + rng.normal(0, 0.01, 120)
    runs = true + rng.normal(0, 0.1, size=(3, 120))
    write_csv_atomic(tmp_path / "truth.csv", COMBINED_COLUMNS, [
        {"Workflow": str(wf), "Workflow_ID": wf.index, "Reward": runs[:, wf.index].mean(),
         "Reward_SE": runs[:, wf.index].std(ddof=1) / np.sqrt(3), "Compliance": 1.0, "Runs": 3,
         "Run_Rewards": " ".join(f"{x:.4f}" for x in runs[:, wf.index])} for wf in all_workflows()])
    small = dict(pretrain_episodes=20, min_episodes=10, max_episodes=20, episodes_per_update=10,
                 compliance_threshold=0.0, collector="sequential",
                 ppo=PPOConfig(hidden=8, epochs=1, minibatches=1))
    res = quality.run_quality(tmp_path / "truth.csv", seeds=[0, 1], ks=(1, 3), cfg_overrides=small,
                              workdir=tmp_path / "q")
    truth = quality.ground_truth(tmp_path / "truth.csv")
    for acq in ("constrained", "random"):
        assert [e["seed"] for e in res["per_seed"][acq]] == [0, 1]
        assert {e["acquisition"] for e in res["per_seed"][acq]} == {acq}  # what really ran
        for e in res["per_seed"][acq]:
            for k in (1, 3):
                assert e["ranks"][k] == truth["rows"][e["picks"][k]]["Rank"]
    assert truth["rows"][7]["Rank"] == 1
    assert res["workflow_effect"]["runs"] == 3 and res["workflow_effect"]["p_value"] < 1e-6
    row3 = next(r for r in res["table"] if r["K"] == 3)
    assert row3["constrained_median_rank"] == np.median(row3["constrained_ranks"])
    assert 1 <= row3["oracle_random_median_rank"] <= 120


def test_gp_eval_episodes_feed_the_gp_an_evaluation_of_the_final_policy(tmp_path):
    """--gp-eval-episodes N: the GP observation is the mean of N evaluation episodes of the
    visit's saved policy (reproducible from its checkpoint), not the last update's mean; training
    and the budget are unchanged."""
    from wfrl.collect.base import make_collector
    from wfrl.ppo.learner import PPOLearner
    from wfrl.rng import EVAL_EPISODE_BASE, episode_block
    from wfrl.runlog import load_checkpoint
    kw = dict(total_episodes=400, max_episodes=100, gp_eval_episodes=70, max_evaluations=1)
    summary = search(_cfg(tmp_path / "ev", **kw), progress=_quiet)
    ref = search(_cfg(tmp_path / "ref", total_episodes=400, max_episodes=100, max_evaluations=1),
                 progress=_quiet)
    assert summary["episodes_used"] == ref["episodes_used"]
    assert _comparable(read_csv(tmp_path / "ev" / "training_log.csv")) == \
        _comparable(read_csv(tmp_path / "ref" / "training_log.csv"))
    gpl = read_csv(tmp_path / "ev" / "gp_sampling_log.csv")
    first = gpl[0]
    assert first["GP_Updated"] == "True"
    assert len(gpl) == 1 and summary["evaluation_episodes"] == 70
    wf = Workflow.from_index(int(first["Workflow_ID"]))
    ck = load_checkpoint(tmp_path / "ev" / "checkpoints" / f"wf_{wf.index:03d}.pt")
    learner = PPOLearner(PPO, seed=0)
    learner.model.load_state_dict(ck["model"])
    col = make_collector("sequential", "sim", "B_lineAgent", PPO.net(), 3, 30.0, False, 1, 70)
    try:
        eps = col.collect(learner.flat_weights(), 1, wf, episode_block(EVAL_EPISODE_BASE, 1), 70)
    finally:
        col.close()
    assert float(first["Reward"]) == pytest.approx(np.mean([e.env_return for e in eps]), abs=1e-3)
    assert first["Reward"] != read_csv(tmp_path / "ref" / "gp_sampling_log.csv")[0]["Reward"]


def test_best_after_reports_the_best_posterior_among_compliant_visits():
    """A hand-made log: workflow 7 observed at −10 twice, workflow 8 (its neighbour) at −30, 100 at
    −20 but below θ (not given to the GP), 50 at −25 after visit 3. After 2 visits the pick is 7;
    after 4, still 7 (100 never counts; 50 is worse)."""
    from wfrl.search.quality import best_after

    def row(it, w, r, ok):
        return {"Iteration": str(it), "Workflow_ID": str(w), "Reward": str(r), "Reward_SE": "0.5",
                "GP_Updated": str(ok), "Lineage_Episodes": "1000"}
    log = [row(1, 8, -30, True), row(2, 7, -10, True), row(3, 100, -5, False),
           row(4, 50, -25, True), row(5, 7, -10, True)]
    assert best_after(log, 1, detrend=False) == 8
    assert best_after(log, 2, detrend=False) == 7
    assert best_after(log, 5, detrend=False) == 7
    assert best_after([row(1, 3, -1, False)], 1, detrend=False) is None


def test_a_search_state_of_version_2_is_refused_in_one_line(tmp_path):
    """A run whose state was written before the state was typed (version 2, an untyped dict):
    --resume ends in one line and exit status 2, and touches nothing."""
    import torch
    run = tmp_path / "old"
    run.mkdir()
    (run / "experiment_config.json").write_text(json.dumps(
        {"mode": "search", "total_episodes": 1000, "out": str(run)}))
    meta = {"iteration": 1, "episodes_used": 150, "updates": 3, "visits": [], "trained": {"7": 50},
            "lineage": {}, "active": {"workflow": 7, "ucb": 1.0, "episodes": 50}, "optimizer": None,
            "pretrain": {"episodes": 100, "updates": 2, "done": True}, "wall_time": 1.5,
            "rows": {"training_log": 3, "gp_sampling_log": 0}, "finished": False}
    torch.save({"format": "wfrl/search-state", "format_version": 2, "meta": json.dumps(meta),
                "learner": None}, run / "search_state.pt")
    before = (run / "search_state.pt").read_bytes()
    r = _cli("train", "--resume", str(run))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "older wfrl" in lines[0] and "version 2" in lines[0] and "Traceback" not in r.stderr
    assert (run / "search_state.pt").read_bytes() == before


def test_state_round_trips_and_a_missing_field_is_damage(tmp_path):
    import torch

    from wfrl.errors import UserError
    from wfrl.search.state import (STATE_VERSION, Measurement, Pick, Pretraining, SearchState,
                                   Visit, load_state, save_state)
    pick = Pick(workflow=7, score=0.5, mean=-40.0, sd=2.0, ucb=-36.0, beta=4.0, p_feasible=0.8)
    ended = Visit(iteration=1, pick=pick, inherited_from=-1, lineage_start=100, episodes=150,
                  updates=3, recent_compliance=[0.9, 0.97, 0.99], best_compliance=0.99,
                  last_update=Measurement(-41.0, 1.5, 0.9533), last_update_episodes=50,
                  stop="compliant", result=Measurement(-40.5, 1.2, 0.9533), gp_updated=True,
                  evaluation={"reward": -40.5, "se": 1.2, "compliance": 0.96})
    active = Visit(iteration=2, pick=Pick(90, 0.1, float("nan"), 3.0, 1.0, 4.0, 0.5),
                   inherited_from=None, lineage_start=0)
    state = SearchState(iteration=2, episodes_used=250, updates=5, eval_episodes=70,
                        pretraining=Pretraining(100, 2, True), active=active, visits=[ended],
                        trained={7: 150}, lineage={7: 250}, training_log_rows=5, gp_log_rows=1,
                        wall_time=3.25, optimizer={"kind": "x"})
    path = tmp_path / "search_state.pt"
    save_state(path, state, {"version": 4})
    loaded, learner = load_state(path)
    assert learner == {"version": 4} and loaded.visits == state.visits
    assert loaded.trained == {7: 150} and loaded.lineage == {7: 250}
    assert loaded.active.pick.workflow == 90 and np.isnan(loaded.active.pick.mean)
    assert loaded.pretraining == state.pretraining and loaded.gp_log_rows == 1
    blob = torch.load(path, weights_only=True)
    assert blob["format_version"] == STATE_VERSION == 3
    meta = json.loads(blob["meta"])
    del meta["gp_log_rows"]
    torch.save({**blob, "meta": json.dumps(meta)}, path)
    with pytest.raises(UserError, match="damaged .*gp_log_rows"):
        load_state(path)
