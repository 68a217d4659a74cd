"""Collection overlapped with learning (--overlap): the batch collected ahead is exactly the batch
the pre-update weights play, it records their version, and overlapped runs are deterministic —
across collectors too; without overlap a run is ppo_step after ppo_step."""
import numpy as np
import pytest
from _search_helpers import comparable, quiet

from wfrl.collect.base import make_collector
from wfrl.config.run import PPOConfig, TrainConfig
from wfrl.ppo.learner import PPOLearner
from wfrl.runlog import load_checkpoint, read_csv
from wfrl.training.run import train
from wfrl.training.steps import LearnerSteps, ppo_step
from wfrl.workflow import Workflow

WF = Workflow.parse("critical_first")
PPO = PPOConfig(hidden=32, epochs=2, memory=True, mask=True)
N = 8


def _collector(name="sequential", rows=N):
    return make_collector(name, "sim", "mixed", PPO.net(), 4, 30.0, False, 2, rows)


def _arrays(col):
    return {k: v.copy() for k, v in col.buffer.arrays.items()}


def test_the_batch_collected_ahead_is_the_pre_update_weights_batch():
    cond = np.tile(WF.onehot(), (N, 1))
    col, check = _collector(), _collector()
    try:
        learner = PPOLearner(PPO, seed=1)
        steps = LearnerSteps(col, PPO, overlap=True)
        before = learner.flat_weights()
        eps0, *_ = steps.step(learner, WF, cond, 100, N, then=lambda e: (WF, 100 + N, N))
        weights, version = steps.behaviour
        np.testing.assert_array_equal(weights, before)          # played with the old weights
        assert (version, learner.version) == (0, 1)              # … one version stale
        assert not np.array_equal(learner.flat_weights(), before)
        eps1, *_ = steps.step(learner, WF, cond, 100 + N, N)     # takes the batch collected ahead
        assert steps.behaviour is None
        assert [e.weights_version for e in eps0] == [0] * N
        assert [e.weights_version for e in eps1] == [0] * N
        assert [e.episode for e in eps1] == list(range(100 + N, 100 + 2 * N))
        ahead = _arrays(col)
        # the same episodes collected on their own with the pre-update weights: same actions,
        # same behaviour log-probabilities (what the PPO ratio of the next update is taken on)
        want = check.collect(before, 0, WF, 100 + N, N)
        assert [(e.episode, e.env_return, e.weights_version) for e in want] == \
            [(e.episode, e.env_return, e.weights_version) for e in eps1]
        for name in ("obs", "actions", "logprobs", "values", "rewards", "lengths"):
            np.testing.assert_array_equal(ahead[name], check.buffer.arrays[name], err_msg=name)
        # the current weights would have played them differently
        check.collect(learner.flat_weights(), 1, WF, 100 + N, N)
        assert not np.array_equal(ahead["logprobs"], check.buffer.arrays["logprobs"])
    finally:
        col.close()
        check.close()


def test_without_overlap_steps_are_ppo_steps():
    cond = np.tile(WF.onehot(), (N, 1))
    a_col, b_col = _collector(), _collector()
    try:
        a, b = PPOLearner(PPO, seed=2), PPOLearner(PPO, seed=2)
        steps = LearnerSteps(a_col, PPO, overlap=False)
        for k in range(3):
            ea, *_ = steps.step(a, WF, cond, 10 + N * k, N, then=lambda e: (WF, 0, N))
            eb, *_ = ppo_step(b_col, b, WF, cond, 10 + N * k, N, PPO)
            assert steps.behaviour is None and ea == eb
        np.testing.assert_array_equal(a.flat_weights(), b.flat_weights())
    finally:
        a_col.close()
        b_col.close()


def test_only_a_batch_played_by_older_weights_is_updated_as_stale():
    # The learner is told a batch is stale (the decoupled objective, PPOConfig.decoupled) exactly
    # when the weights that played it are older than its own: with overlap every batch after the
    # first, without overlap none.
    cond = np.tile(WF.onehot(), (N, 1))
    col = _collector()
    try:
        for overlap, want in ((True, [False, True, True]), (False, [False, False, False])):
            learner = PPOLearner(PPO, seed=2)
            seen, update = [], learner.update

            def record(batch, between=None, stale=False, _u=update, _s=seen, **kw):
                _s.append(stale)
                return _u(batch, between=between, stale=stale, **kw)
            learner.update = record
            steps = LearnerSteps(col, PPO, overlap=overlap)
            for k in range(3):
                steps.step(learner, WF, cond, N * k, N,
                           then=(lambda e, k=k: (WF, N * (k + 1), N)) if k < 2 else None)
            assert seen == want, overlap
    finally:
        col.close()


def test_a_batch_asked_for_differently_is_dropped_and_collected_again():
    cond = np.tile(WF.onehot(), (N, 1))
    a_col, b_col = _collector(), _collector()
    try:
        a, b = PPOLearner(PPO, seed=2), PPOLearner(PPO, seed=2)
        steps = LearnerSteps(a_col, PPO, overlap=True)
        steps.step(a, WF, cond, 0, N, then=lambda e: (WF, N, N))
        other = Workflow.parse("reverse")
        got, *_ = steps.step(a, other, cond, N, N)       # not the batch collected ahead
        ppo_step(b_col, b, WF, cond, 0, N, PPO)
        want, *_ = ppo_step(b_col, b, other, cond, N, N, PPO)
        assert got == want
    finally:
        a_col.close()
        b_col.close()


def _train(tmp_path, name, collector, overlap, episodes=480):
    cfg = TrainConfig(workflow="critical_first", collector=collector, n_workers=2,
                      red_agent="mixed", total_episodes=episodes, episodes_per_update=40,
                      eval_every=0, seed=6, overlap=overlap, out=str(tmp_path / name),
                      ppo=PPO)
    summary = train(cfg, progress=quiet)
    return summary, read_csv(tmp_path / name / "training_log.csv"), \
        load_checkpoint(tmp_path / name / "checkpoint.pt")


@pytest.mark.slow
def test_overlapped_training_is_deterministic_across_runs_and_collectors(tmp_path):
    s1, log1, ck1 = _train(tmp_path, "a", "sequential", True)
    s2, log2, ck2 = _train(tmp_path, "b", "sequential", True)
    s3, log3, ck3 = _train(tmp_path, "c", "async", True)
    s0, log0, _ = _train(tmp_path, "d", "sequential", False)
    assert comparable(log1) == comparable(log2) == comparable(log3)
    for k in ck1["model"]:
        assert ck1["model"][k].equal(ck2["model"][k]) and ck1["model"][k].equal(ck3["model"][k])
    assert s1["episodes"] == s3["episodes"] == 480 and len(log1) == 12
    # Weights_Version: the version that played each batch; one behind without overlap, two
    # behind (one stale) with it after the first batch
    assert [int(r["Weights_Version"]) for r in log0] == list(range(12))
    assert [int(r["Weights_Version"]) for r in log1] == [0] + list(range(11))
    assert comparable(log1) != comparable(log0)       # overlap really changes which weights play
    assert log1[0]["Env_Reward"] == log0[0]["Env_Reward"]   # … but not the first batch


def test_a_search_started_before_overlap_existed_resumes_without_it(tmp_path):
    import json

    from wfrl.config.run import SearchConfig
    from wfrl.search.state import resume_config
    stored = {"mode": "search", "wfrl_version": "0.x", **SearchConfig(out=str(tmp_path)).to_dict()}
    del stored["overlap"]
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).overlap is False
    stored["overlap"] = True
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).overlap is True
    # one started before --decoupled existed keeps the objective it began with
    assert resume_config(str(tmp_path)).ppo.decoupled is True
    del stored["ppo"]["decoupled"]
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).ppo.decoupled is False
    # ... and one started before --first-fix-bonus existed had the bonus; a stored choice stays
    stored["ppo"]["first_fix_bonus"] = False
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).ppo.first_fix_bonus is False
    del stored["ppo"]["first_fix_bonus"]
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).ppo.first_fix_bonus is True
    # one started before --compliance-eval-episodes existed judges its visits by their window
    assert resume_config(str(tmp_path)).compliance_eval_episodes == 200
    del stored["compliance_eval_episodes"]
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).compliance_eval_episodes == 0


def test_settle_waits_for_the_batch_and_keeps_it():
    cond = np.tile(WF.onehot(), (N, 1))
    col = _collector()
    try:
        learner = PPOLearner(PPO, seed=1)
        steps = LearnerSteps(col, PPO, overlap=True)
        steps.step(learner, WF, cond, 0, N, then=lambda e: (WF, N, N))
        job = steps._ahead[1]
        steps.settle()
        assert job.done() and steps.behaviour is not None     # in, and still the next batch
        eps, *_ = steps.step(learner, WF, cond, N, N)
        assert [e.weights_version for e in eps] == [0] * N
    finally:
        col.close()


@pytest.mark.parametrize("threads,overlap", [(1, True), (1, False), (2, True), (2, False)])
def test_the_update_runs_on_the_learner_threads_and_gives_them_back(threads, overlap):
    # --learner-threads: the update's torch thread count (one by default), set for each update
    # and restored after it; with more than one and a batch collected meanwhile, the first third
    # of the minibatch steps leave a core to the collection (a fixed share, docs/training.md).
    import torch
    cond = np.tile(WF.onehot(), (N, 1))
    col = _collector()
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        learner = PPOLearner(PPO, seed=1)
        seen = []
        update = learner.update

        def spy(batch, between=None, stale=False, prepared=None):
            def step():    # (runs before each minibatch step)
                if between is not None:
                    between()
                seen.append(torch.get_num_threads())
            return update(batch, between=step, stale=stale, prepared=prepared)
        learner.update = spy
        steps = LearnerSteps(col, PPO, overlap=overlap, threads=threads)
        for k in range(2):
            steps.step(learner, WF, cond, 10 + N * k, N, then=lambda e, k=k: (WF, 10 + N * (k + 1), N))
            assert torch.get_num_threads() == 3          # given back after each update
        steps.cancel()
        per_update = PPO.epochs * PPO.minibatches
        assert len(seen) == 2 * per_update
        if threads == 1 or not overlap:
            assert seen == [threads] * (2 * per_update)
        else:   # the second update ran while the third batch was collected
            shared = per_update // 3
            assert seen[per_update:] == [1] * shared + [2] * (per_update - shared)
    finally:
        torch.set_num_threads(before)
        col.close()


def test_the_batch_built_ahead_is_the_one_built_after_and_follows_the_caller():
    # A batch collected ahead is also turned into the learner's batch on the background thread:
    # the same arrays as collecting those episodes with those weights and building the batch
    # afterwards; and a caller that conditions a batch otherwise than with its workflow's one-hot
    # gets the batch built with its own rows.
    from wfrl.ppo.batch import to_batch
    cond = np.tile(WF.onehot(), (N, 1))
    col, check = _collector(), _collector()
    try:
        learner = PPOLearner(PPO, seed=1)
        steps = LearnerSteps(col, PPO, overlap=True)
        seen = []
        real = learner.update
        learner.update = lambda batch, **kw: (seen.append(batch), real(batch, **kw))[1]
        before = learner.flat_weights()
        steps.step(learner, WF, cond, 100, N, then=lambda e: (WF, 100 + N, N))
        steps.step(learner, WF, cond, 100 + N, N, then=lambda e: (WF, 100 + 2 * N, N))
        check.collect(before, 0, WF, 100 + N, N)      # the second batch, played as it was
        want = to_batch(check.buffer, cond, PPO.gamma, PPO.gae_lambda, PPO.net(),
                        first_fix=steps.first_fix)
        for name in ("obs", "actions", "logprobs", "advantages", "returns", "masks"):
            np.testing.assert_array_equal(getattr(seen[1], name), getattr(want, name), name)
        other = np.zeros_like(cond)                   # the third, built ahead with the one-hot
        steps.step(learner, WF, other, 100 + 2 * N, N)
        np.testing.assert_array_equal(seen[2].obs[:, -other.shape[1]:], 0.0)
        assert seen[1].obs[:, -cond.shape[1]:].any()
    finally:
        col.close()
        check.close()


def test_updates_prepared_ahead_are_used_and_change_nothing(monkeypatch):
    # With the batch collected ahead, the next update's permutations, plan and gathered epochs
    # are prepared on the background thread too (PPOLearner.preparer): the split updates use
    # them, and the run's weights, statistics and generator are those of a run that prepares
    # nothing ahead, to the last bit.
    import dataclasses

    from wfrl.ppo import learner as learner_mod
    ppo = dataclasses.replace(PPO, clip_per_net=True, epochs=3)
    cond = np.tile(WF.onehot(), (N, 1))
    fitted = []
    real_fits = learner_mod.Prepared.fits

    def spy_fits(self, lrn, n):
        fitted.append(real_fits(self, lrn, n))
        return fitted[-1]
    monkeypatch.setattr(learner_mod.Prepared, "fits", spy_fits)

    def run():
        col = _collector()
        try:
            learner = PPOLearner(ppo, seed=2)
            steps = LearnerSteps(col, ppo, overlap=True)
            stats = [steps.step(learner, WF, cond, 10 + N * k, N,
                                then=lambda e, k=k: (WF, 10 + N * (k + 1), N))[1]
                     for k in range(5)]
            steps.cancel()
            return learner, stats
        finally:
            col.close()
    with_prep, stats = run()
    assert fitted.count(True) >= 3      # the updates after the first (Adam's state exists)
    monkeypatch.setattr(learner_mod.PPOLearner, "preparer",
                        lambda self, before: (lambda batch: None))
    without, stats_without = run()
    assert stats == stats_without
    np.testing.assert_array_equal(with_prep.flat_weights(), without.flat_weights())
    assert with_prep._gen.get_state().equal(without._gen.get_state())
