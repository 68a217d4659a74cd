"""The search's pretraining warm-up (--pretrain-warmup): its first episodes play without the
compliance reward, the rest and every visit with it; nothing is collected ahead across the
switch; a run killed inside the warm-up resumes to the uninterrupted run; older runs resume
without one."""
import json

import pytest
from _search_helpers import assert_same_logs, quiet, resume_cfg, search_cfg

from wfrl.config.run import SearchConfig
from wfrl.runlog import read_csv
from wfrl.search.loop import WorkflowSearch, search
from wfrl.training.steps import pretrain


def test_the_warmup_is_a_third_of_the_pretraining_unless_given():
    assert SearchConfig().warmup_episodes() == 20_000
    assert SearchConfig(pretrain_episodes=120_000, total_episodes=135_000).warmup_episodes() \
        == 40_000
    assert SearchConfig(pretrain_warmup=0).warmup_episodes() == 0
    assert SearchConfig(pretrain_warmup=500).warmup_episodes() == 500
    # never more than the pretraining (which never exceeds the budget)
    assert SearchConfig(pretrain_warmup=10 ** 6).warmup_episodes() == 60_000
    assert SearchConfig(total_episodes=900, pretrain_warmup=10 ** 6).warmup_episodes() == 900
    assert SearchConfig(pretrain_episodes=0).warmup_episodes() == 0


class _RecordingSteps:
    """LearnerSteps' interface: records each step's episodes and the batch it asks for next."""

    def __init__(self):
        self.steps = []

    def step(self, learner, wf, cond, first, n, then=None, behaviour=None):
        self.steps.append((first, n, then([]) if then else None))
        return [], {}, 0.0, 0.0


class _Learner:
    def set_progress(self, share):
        self.share = share


def test_pretrain_stops_at_until_without_asking_for_a_batch_past_it():
    steps, learner = _RecordingSteps(), _Learner()
    done = list(pretrain(steps, learner, 0, 1000, 0, 500, 100, until=250))
    # updates start at 0, 100, 200: the one that reaches 250 is the last, and asks for nothing
    assert [s[:2] for s in steps.steps] == [(1000, 100), (1100, 100), (1200, 100)]
    assert [s[2] is None for s in steps.steps] == [False, False, True]
    assert len(done) == 3 and learner.share == 200 / 500   # the schedule runs over the total
    rest = _RecordingSteps()
    list(pretrain(rest, learner, 0, 1000, 300, 500, 100, done_updates=3))
    assert [s[:2] for s in rest.steps] == [(1300, 100), (1400, 100)]
    assert rest.steps[0][2][1:] == (1400, 100) and rest.steps[-1][2] is None


def _align(rows):
    return [float(r["Alignment_Bonus"]) for r in rows]


@pytest.mark.slow
def test_warmup_rows_carry_no_compliance_reward_and_later_rows_do(tmp_path):
    out = tmp_path / "run"
    search(search_cfg(out, total_episodes=500, pretrain_episodes=250, pretrain_warmup=120),
           progress=quiet)
    rows = read_csv(out / "training_log.csv")
    pre = [r for r in rows if r["Phase"] == "pretrain"]
    assert [int(r["Episodes"]) for r in pre] == [50, 100, 150, 200, 250]
    # updates starting before episode 120 (at 0, 50, 100) play without λ
    assert _align(pre[:3]) == [0.0] * 3
    assert all(a != 0.0 for a in _align(pre[3:]))
    visits = [r for r in rows if r["Phase"] != "pretrain"]
    assert visits and all(a != 0.0 for a in _align(visits))
    # a warm-up as long as the pretraining still leaves the visits their compliance reward
    full = tmp_path / "full"
    search(search_cfg(full, total_episodes=300, pretrain_episodes=100, pretrain_warmup=10 ** 6),
           progress=quiet)
    rows = read_csv(full / "training_log.csv")
    assert _align([r for r in rows if r["Phase"] == "pretrain"]) == [0.0, 0.0]
    assert all(a != 0.0 for a in _align([r for r in rows if r["Phase"] != "pretrain"]))


@pytest.mark.slow
@pytest.mark.parametrize("die_at", [2, 3])  # inside the warm-up / at its last update
def test_a_run_killed_in_the_warmup_resumes_to_the_uninterrupted_run(tmp_path, monkeypatch,
                                                                     die_at):
    """Overlapped (the default): the batch collected ahead inside the warm-up is committed with
    the weights that play it, and the resumed run collects it with them on the warm-up's
    collector, then switches as the uninterrupted run does."""
    kw = dict(total_episodes=450, pretrain_episodes=250, pretrain_warmup=120)
    ref = search(search_cfg(tmp_path / "ref", **kw), progress=quiet)
    real = WorkflowSearch._commit

    def dying_commit(self, learner):
        if self.state.training_log_rows == die_at:  # row logged, about to be committed
            raise KeyboardInterrupt
        real(self, learner)

    out = tmp_path / "run"
    monkeypatch.setattr(WorkflowSearch, "_commit", dying_commit)
    with pytest.raises(KeyboardInterrupt):
        search(search_cfg(out, **kw), progress=quiet)
    monkeypatch.setattr(WorkflowSearch, "_commit", real)
    summary = search(resume_cfg(out), resume=True, progress=quiet)
    assert_same_logs(out, tmp_path / "ref")
    assert summary["top"] == ref["top"]


def test_a_search_started_before_the_warmup_existed_resumes_without_one(tmp_path):
    from wfrl.search.state import resume_config
    stored = {"mode": "search", "wfrl_version": "0.x", **SearchConfig(out=str(tmp_path)).to_dict()}
    assert stored["pretrain_warmup"] is None
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).warmup_episodes() == 20_000
    del stored["pretrain_warmup"]
    (tmp_path / "experiment_config.json").write_text(json.dumps(stored))
    assert resume_config(str(tmp_path)).warmup_episodes() == 0


@pytest.mark.slow
def test_a_collector_that_fails_to_start_after_the_warmup_loses_nothing(tmp_path, monkeypatch):
    """The search's collector cannot start at the switch (e.g. its Ray instance does not come
    up): the error is the run's, every committed update stays, and a resume finishes the run as
    the uninterrupted one."""
    import wfrl.search.loop as loop
    from wfrl.errors import UserError
    real, opened = loop.make_collector, []

    def second_fails(*args, **kw):
        opened.append(args)
        if len(opened) == 2:
            raise UserError("the collector could not start")
        return real(*args, **kw)

    kw = dict(total_episodes=450, pretrain_episodes=250, pretrain_warmup=120)
    out = tmp_path / "run"
    monkeypatch.setattr(loop, "make_collector", second_fails)
    with pytest.raises(UserError, match="could not start"):
        search(search_cfg(out, **kw), progress=quiet)
    monkeypatch.setattr(loop, "make_collector", real)
    assert [int(r["Episodes"]) for r in read_csv(out / "training_log.csv")] == [50, 100, 150]
    summary = search(resume_cfg(out), resume=True, progress=quiet)
    ref = search(search_cfg(tmp_path / "ref", **kw), progress=quiet)
    assert_same_logs(out, tmp_path / "ref")
    assert summary["top"] == ref["top"]
