"""The compliance-gated search loop: its budget, records and inheritance, which visits become
observations, the acquisitions it runs with, the GP evaluation episodes, and its command's
one-line errors."""
import dataclasses
import json

import numpy as np
import pytest
from _search_helpers import PPO, comparable, quiet, reference_run, run_cli, search_cfg  # noqa: F401  (reference_run: a fixture)

from wfrl.errors import UserError
from wfrl.runlog import read_csv
from wfrl.search.loop import WorkflowSearch, closest_trained, search
from wfrl.workflow import Workflow


def test_closest_trained_workflow():
    wf = Workflow.parse("op_server,enterprise,defender,op_host,user").index
    trained = {Workflow.parse("user,op_host,defender,enterprise,op_server").index: 1,   # d = 10
               Workflow.parse("op_server,enterprise,defender,user,op_host").index: 1,   # d = 1
               Workflow.parse("enterprise,op_server,defender,user,op_host").index: 1}   # d = 2
    assert closest_trained(wf, trained) == Workflow.parse(
        "op_server,enterprise,defender,user,op_host").index
    assert closest_trained(wf, {}) is None
    assert closest_trained(wf, {wf: 5, **trained}) == wf


def test_closing_table_names_the_workflows_at_theta():
    from wfrl.search.report import format_table
    summary = {"visits": 15, "episodes_used": 70000, "total_episodes": 70000, "wall_time_s": 99.0,
               "predicted_feasible": 61, "at_theta": 0, "top": []}
    assert "predicted feasible: 61 of 120 workflows\n" in format_table(summary, 0.95)
    assert "at θ" not in format_table(summary, 0.95)
    summary["at_theta"] = 59
    line = format_table(summary, 0.95).splitlines()[1]
    assert line.startswith("predicted feasible: 61 of 120 workflows; of the others, 59 at θ")


@pytest.mark.slow
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
    # the reported feasible set and the workflows at θ, from posterior.csv's P_Feasible
    from wfrl.search.optimizer import SURE_LEVEL
    p = np.array([float(r["P_Feasible"]) for r in read_csv(out / "posterior.csv")])
    assert summary["predicted_feasible"] == int((p >= 0.5).sum())
    assert summary["at_theta"] == int(((p < 0.5) & (p >= 1 - SURE_LEVEL)).sum())
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


@pytest.mark.slow
def test_inherit_base_starts_every_new_workflow_from_the_base(tmp_path):
    summary = search(search_cfg(tmp_path / "run", total_episodes=500, inherit="base"),
                     progress=quiet)
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


@pytest.mark.slow
def test_gp_gets_no_observation_from_short_or_stub_visits(tmp_path):
    # θ = 0: every visit is "compliant" and stops at the first update past min_episodes (60):
    # 50 + 50. The budget cuts the third visit to 50 + 10: it trained its minimum, but its last
    # update is a 10-episode stub, so it is not an observation.
    search(search_cfg(tmp_path / "run", total_episodes=360, max_episodes=150, min_episodes=60,
                compliance_threshold=0.0, pretrain_episodes=100), progress=quiet)
    gpl = read_csv(tmp_path / "run" / "gp_sampling_log.csv")
    assert [(int(r["Episodes_Trained"]), r["GP_Updated"]) for r in gpl] == \
        [(100, "True"), (100, "True"), (60, "False")]
    # and a visit that stops before min_episodes is not one either
    search(search_cfg(tmp_path / "run2", total_episodes=300, max_episodes=150, min_episodes=200,
                compliance_threshold=0.0, pretrain_episodes=100), progress=quiet)
    assert {r["GP_Updated"] for r in read_csv(tmp_path / "run2" / "gp_sampling_log.csv")} == \
        {"False"}


@pytest.mark.slow
def test_random_acquisition_visits_distinct_workflows_and_keeps_the_records(tmp_path):
    out = tmp_path / "run"
    summary = search(search_cfg(out, total_episodes=700, acquisition="random", max_episodes=100),
                     progress=quiet)
    gpl = read_csv(out / "gp_sampling_log.csv")
    ids = [int(r["Workflow_ID"]) for r in gpl]
    assert summary["visits"] == len(ids) >= 5 and len(set(ids)) == len(ids)
    again = search(search_cfg(tmp_path / "again", total_episodes=700, acquisition="random",
                        max_episodes=100), progress=quiet)
    assert [int(r["Workflow_ID"]) for r in read_csv(tmp_path / "again" / "gp_sampling_log.csv")] \
        == ids and again["episodes_used"] == summary["episodes_used"] == 700
    ucb = search(search_cfg(tmp_path / "ucb", total_episodes=700, max_episodes=100), progress=quiet)
    ucb_ids = [int(r["Workflow_ID"]) for r in read_csv(tmp_path / "ucb" / "gp_sampling_log.csv")]
    assert ucb["visits"] >= 5 and ucb_ids != ids


def _replay_first_visit(run, row, n):
    """n episodes of the policy the run saved for its first visit (gp_sampling_log row `row`), on
    the evaluation episodes reserved for visit 1 (the search's settings of search_cfg)."""
    from wfrl.collect.base import make_collector
    from wfrl.ppo.learner import PPOLearner
    from wfrl.rng import EVAL_EPISODE_BASE, episode_block
    from wfrl.runlog import load_checkpoint
    wf = Workflow.from_index(int(row["Workflow_ID"]))
    learner = PPOLearner(PPO, seed=0)
    learner.model.load_state_dict(
        load_checkpoint(run / "checkpoints" / f"wf_{wf.index:03d}.pt")["model"])
    col = make_collector("sequential", "sim", "B_lineAgent", PPO.net(), 3, 30.0, False, 1, n)
    try:
        return col.collect(learner.flat_weights(), 1, wf, episode_block(EVAL_EPISODE_BASE, 1), n)
    finally:
        col.close()


@pytest.mark.slow
def test_gp_eval_episodes_feed_the_gp_an_evaluation_of_the_final_policy(tmp_path):
    """--gp-eval-episodes N: the GP observation is the mean of N evaluation episodes of the
    visit's saved policy (reproducible from its checkpoint), not the last update's mean; training
    and the budget are unchanged."""
    kw = dict(total_episodes=400, max_episodes=100, gp_eval_episodes=70, max_evaluations=1,
              compliance_eval_episodes=0)
    summary = search(search_cfg(tmp_path / "ev", **kw), progress=quiet)
    ref = search(search_cfg(tmp_path / "ref", total_episodes=400, max_episodes=100,
                            max_evaluations=1),
                 progress=quiet)
    assert summary["episodes_used"] == ref["episodes_used"]
    assert comparable(read_csv(tmp_path / "ev" / "training_log.csv")) == \
        comparable(read_csv(tmp_path / "ref" / "training_log.csv"))
    gpl = read_csv(tmp_path / "ev" / "gp_sampling_log.csv")
    first = gpl[0]
    assert first["GP_Updated"] == "True"
    assert len(gpl) == 1 and summary["evaluation_episodes"] == 70
    eps = _replay_first_visit(tmp_path / "ev", first, 70)
    assert float(first["Reward"]) == pytest.approx(np.mean([e.env_return for e in eps]), abs=1e-3)
    assert first["Reward"] != read_csv(tmp_path / "ref" / "gp_sampling_log.csv")[0]["Reward"]


@pytest.mark.slow
def test_compliance_eval_episodes_decide_feasibility_from_fresh_episodes(tmp_path):
    """--compliance-eval-episodes N: what the optimizer is told, and what decides whether a visit
    reached θ, is the compliance of N fresh episodes of the visit's saved policy (reserved
    episode numbers), not the training window that stopped it; training is unchanged."""
    kw = dict(total_episodes=400, max_episodes=100, max_evaluations=1)
    summary = search(search_cfg(tmp_path / "ev", compliance_eval_episodes=60, **kw),
                     progress=quiet)
    ref = search(search_cfg(tmp_path / "ref", compliance_eval_episodes=0, **kw), progress=quiet)
    assert summary["episodes_used"] == ref["episodes_used"]
    assert summary["evaluation_episodes"] == 60 and ref["evaluation_episodes"] == 0
    assert comparable(read_csv(tmp_path / "ev" / "training_log.csv")) == \
        comparable(read_csv(tmp_path / "ref" / "training_log.csv"))
    first = read_csv(tmp_path / "ev" / "gp_sampling_log.csv")[0]
    window = float(read_csv(tmp_path / "ref" / "gp_sampling_log.csv")[0]["Final_Compliance"])
    eps = _replay_first_visit(tmp_path / "ev", first, 60)
    fresh = float(np.mean([e.compliance for e in eps]))
    assert float(first["Final_Compliance"]) == pytest.approx(fresh, abs=1e-4)
    assert fresh != pytest.approx(window, abs=1e-4)
    # with θ between the window and the fresh measurement, the fresh one decides
    theta = round((fresh + window) / 2, 4)
    runs = {}
    for n in (60, 0):
        out = tmp_path / f"theta{n}"
        search(search_cfg(out, compliance_eval_episodes=n, compliance_threshold=theta, **kw),
               progress=quiet)
        runs[n] = read_csv(out / "gp_sampling_log.csv")[0]["GP_Updated"]
    assert runs[60] == str(fresh >= theta) and runs[0] == str(window >= theta)
    assert runs[60] != runs[0]


def test_existing_run_is_not_overwritten(reference_run):
    ref_out, _ = reference_run
    before = (ref_out / "training_log.csv").read_bytes()
    with pytest.raises(UserError, match="already holds a run"):
        WorkflowSearch(search_cfg(ref_out))
    assert (ref_out / "training_log.csv").read_bytes() == before


@pytest.mark.slow
def test_auto_collector_also_trains_one_workflow(tmp_path):
    r = run_cli("train", "--workflow", "balanced", "--collector", "auto", "--total-episodes", "4",
             "--episodes-per-update", "2", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "o" / "experiment_config.json").read_text())
    assert cfg["collector"] in ("async", "sequential")


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
    r = run_cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_greedy_visit_evaluation_is_the_mean_over_reds_of_the_saved_policy(tmp_path):
    """--visit-eval greedy (the default): a visit's reward is the mean over B_line and Meander of
    its saved policy's greedy returns on the visit's reserved episodes, its compliance the mean of
    theirs — recomputed here from the checkpoint; with one named red, that red alone."""
    import math

    from wfrl.envs import make_backend
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.evaluation.returns import play, summarise
    from wfrl.rng import EVAL_EPISODE_BASE, episode_block
    from wfrl.runlog import load_checkpoint
    from wfrl.workflow import Workflow
    for red, reds in (("mixed", ["B_lineAgent", "RedMeanderAgent"]),
                      ("RedMeanderAgent", ["RedMeanderAgent"])):
        out = tmp_path / red
        search(search_cfg(out, total_episodes=400, max_episodes=100, max_evaluations=2,
                          red_agent=red, visit_eval="greedy", gp_eval_episodes=12,
                          ppo=dataclasses.replace(search_cfg(out).ppo, lr_final=0.1)),
               progress=quiet)
        rows = read_csv(out / "gp_sampling_log.csv")
        assert len(rows) == 2
        for row in rows:
            wf = Workflow.from_index(int(row["Workflow_ID"]))
            w, net = weights_from_checkpoint(load_checkpoint(
                out / "checkpoints" / f"wf_{wf.index:03d}.pt"))
            first = episode_block(EVAL_EPISODE_BASE, int(row["Iteration"]))
            per = []
            for r in reds:
                b = make_backend("sim", r, seed=3)
                per.append(summarise(play(b, w, net, wf, 30.0, False, range(first, first + 12), 3,
                                          greedy=True)))
                b.close()
            assert float(row["Reward"]) == pytest.approx(np.mean([s["mean"] for s in per]),
                                                          abs=2e-4)
            assert float(row["Reward_SE"]) == pytest.approx(
                math.sqrt(sum(s["se"] ** 2 for s in per)) / len(per), abs=2e-4)
            assert float(row["Final_Compliance"]) == pytest.approx(
                np.mean([s["compliance"] for s in per]), abs=2e-4)
        post = read_csv(out / "posterior.csv")
        assert [int(r["Workflow_ID"]) for r in post] == list(range(120))
        assert sum(int(r["Visits"]) for r in post) == 2


def test_greedy_visit_evaluation_needs_episodes():
    with pytest.raises(UserError, match="--visit-eval greedy needs --gp-eval-episodes"):
        search_cfg("unused", visit_eval="greedy", gp_eval_episodes=0).validate()
