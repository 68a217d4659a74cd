"""The exhaustive ground truth: every workflow under one protocol (fine-tuned or conditioned), runs
combined and continued, and the test of whether workflows differ beyond training noise."""
import json

import numpy as np
import pytest

from wfrl.config.run import PPOConfig
from wfrl.errors import UserError
from wfrl.workflow import Workflow, all_workflows, kendall_distance

ALL = list(range(120))


def quiet(_line):
    pass


@pytest.mark.slow
def test_exhaustive_repeats_combine_and_continue(tmp_path):
    from wfrl.config.run import ExhaustiveConfig
    from wfrl.search.exhaustive import exhaustive, load_exhaustive
    cfg = ExhaustiveConfig(pretrain_episodes=4, episodes_per_workflow=2, episodes_per_update=2,
                           eval_episodes=3, repeats=2, out=str(tmp_path / "ex"),
                           ppo=PPOConfig(hidden=8, epochs=1, minibatches=1))
    path = exhaustive(cfg, progress=quiet)
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
    exhaustive(cfg, progress=quiet)
    again = {r["Workflow_ID"]: r["Reward"] for r in load_exhaustive(one)}
    assert again == kept  # same seeds → the 5 redone workflows come out the same
    # a table is only continued under the protocol it was started with
    from dataclasses import replace
    with pytest.raises(UserError, match="episodes_per_workflow"):
        exhaustive(replace(cfg, episodes_per_workflow=4), progress=quiet)


@pytest.mark.slow
def test_exhaustive_conditioned_protocol_evaluates_one_policy(tmp_path):
    """--protocol conditioned: one policy trained on random workflows (its base.pt), every
    workflow only evaluated — so an evaluation of base.pt conditioned on a workflow reproduces
    that workflow's row."""
    from dataclasses import replace

    from wfrl.collect.base import make_collector
    from wfrl.config.run import ExhaustiveConfig
    from wfrl.ppo.learner import PPOLearner
    from wfrl.rng import EVAL_EPISODE_BASE
    from wfrl.runlog import load_checkpoint
    from wfrl.search.exhaustive import exhaustive, load_exhaustive
    ppo = PPOConfig(hidden=8, epochs=1, minibatches=1)
    cfg = ExhaustiveConfig(protocol="conditioned", pretrain_episodes=6, episodes_per_update=3,
                           eval_episodes=4, out=str(tmp_path / "ex"), seed=2, ppo=ppo)
    rows = {r["Workflow_ID"]: r for r in load_exhaustive(exhaustive(cfg, progress=quiet))}
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
               progress=quiet)
    stored = json.loads((ft / "experiment_config.json").read_text())
    del stored["protocol"]
    (ft / "experiment_config.json").write_text(json.dumps(stored))
    lines = (ft / "exhaustive.csv").read_text().splitlines(keepends=True)
    (ft / "exhaustive.csv").write_text("".join(lines[:-3]))
    with pytest.raises(UserError, match="protocol"):
        exhaustive(replace(cfg, out=str(ft)), progress=quiet)
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


def test_a_table_started_before_the_new_ppo_settings_continues_under_its_own(tmp_path):
    """A table whose stored settings predate --decoupled and --first-fix-bonus ran with the
    stale-ratio objective and the first-fix bonus: it continues with those, and is refused with
    today's defaults, in one line."""
    import dataclasses

    from wfrl.config.run import ExhaustiveConfig
    from wfrl.search.exhaustive import check_same_protocol
    old = ExhaustiveConfig(out=str(tmp_path), ppo=PPOConfig(decoupled=False, first_fix_bonus=True))
    stored = dataclasses.asdict(old)
    del stored["ppo"]["decoupled"], stored["ppo"]["first_fix_bonus"]
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    check_same_protocol(old, tmp_path)
    with pytest.raises(UserError, match="was started with ppo"):
        check_same_protocol(ExhaustiveConfig(out=str(tmp_path)), tmp_path)
