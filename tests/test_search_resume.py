"""Resuming a search after a kill: at any commit point the resumed run ends identical to an
uninterrupted one; what cannot be resumed (changed settings, a damaged or older state, a finished
run) is refused in one line."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _helpers import popen_wfrl, run_wfrl
from _search_helpers import comparable, quiet, reference_run, resume_cfg, run_cli, search_cfg  # noqa: F401  (reference_run: a fixture)

from wfrl.runlog import read_csv
from wfrl.search.loop import WorkflowSearch, search


@pytest.mark.slow
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
        search(search_cfg(out, total_episodes=730), progress=quiet)
    monkeypatch.setattr(WorkflowSearch, "_commit", real)
    from wfrl.search.state import load_state
    rows_before = len(read_csv(out / "training_log.csv"))
    committed = load_state(out / "search_state.pt")[0].training_log_rows
    assert (rows_before, committed) == (die_at, die_at - 1)  # row written, commit not
    summary = search(resume_cfg(out), resume=True, progress=quiet)
    assert comparable(read_csv(out / "training_log.csv")) == \
        comparable(read_csv(ref_out / "training_log.csv"))
    assert read_csv(out / "gp_sampling_log.csv") == read_csv(ref_out / "gp_sampling_log.csv")
    assert summary["episodes_used"] == ref_summary["episodes_used"]
    assert summary["top"] == ref_summary["top"]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path, reference_run):
    ref_out, ref_summary = reference_run
    out = tmp_path / "run"
    args = [sys.executable, "-m", "wfrl", "train", "--total-episodes", "730",
            "--max-episodes", "300", "--min-episodes", "100", "--episodes-per-update", "50",
            "--compliance-threshold", "0.25", "--patience", "4", "--collector", "sequential",
            "--pretrain-episodes", "100", "--compliance-eval-episodes", "20",
            "--inherit", "closest",
            # the reference run's settings where today's search defaults differ (_search_helpers)
            "--red-agent", "B_lineAgent", "--visit-eval", "training", "--gp-eval-episodes", "0",
            "--lr-final", "1", "--entropy-final", "1", "--first-fix-bonus",
            "--seed", "3", "--hidden", "32", "--epochs", "2", "--out", str(out)]
    proc = popen_wfrl(*args[3:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "training_log.csv"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) > 9:  # mid-search: ≥ 9 updates
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = run_wfrl("train", "--resume", out, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming" in done.stderr
    assert comparable(read_csv(out / "training_log.csv")) == \
        comparable(read_csv(ref_out / "training_log.csv"))
    assert read_csv(out / "gp_sampling_log.csv") == read_csv(ref_out / "gp_sampling_log.csv")
    s = json.loads((out / "summary.json").read_text())
    assert s["episodes_used"] == ref_summary["episodes_used"] and s["top"] == ref_summary["top"]
    # resuming a finished run is refused in one line
    again = run_wfrl("train", "--resume", out, timeout=120)
    assert again.returncode == 2 and "has finished" in again.stderr
    assert "Traceback" not in again.stderr


def test_resume_refuses_changed_settings_and_damaged_state(tmp_path, reference_run):
    ref_out, _ = reference_run
    r = run_cli("train", "--resume", str(ref_out), "--seed", "4")
    assert r.returncode == 2 and "--seed cannot be changed" in r.stderr
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for f in ("experiment_config.json", "training_log.csv", "gp_sampling_log.csv"):
        (damaged / f).write_bytes((Path(ref_out) / f).read_bytes())
    state = (Path(ref_out) / "search_state.pt").read_bytes()
    (damaged / "search_state.pt").write_bytes(state[: len(state) // 2])
    before = {f: (damaged / f).read_bytes() for f in ("training_log.csv", "gp_sampling_log.csv")}
    r = run_cli("train", "--resume", str(damaged))
    assert r.returncode == 2 and "damaged" in r.stderr and "Traceback" not in r.stderr
    assert before == {f: (damaged / f).read_bytes() for f in before}  # nothing touched
    (damaged / "experiment_config.json").write_text("{not json")
    r = run_cli("train", "--resume", str(damaged))
    assert r.returncode == 2 and "not JSON" in r.stderr


@pytest.mark.slow
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
        search(search_cfg(out, total_episodes=400, pretrain_episodes=130), progress=quiet)
    monkeypatch.setattr(WorkflowSearch, "_commit", real)
    summary = search(resume_cfg(out), resume=True, progress=quiet)
    ref = search(search_cfg(tmp_path / "ref", total_episodes=400, pretrain_episodes=130),
                 progress=quiet)
    assert summary["episodes_used"] == ref["episodes_used"] == 400
    assert comparable(read_csv(out / "training_log.csv")) == \
        comparable(read_csv(tmp_path / "ref" / "training_log.csv"))
    assert read_csv(out / "gp_sampling_log.csv") == \
        read_csv(tmp_path / "ref" / "gp_sampling_log.csv")
    assert summary["top"] == ref["top"]


@pytest.mark.slow
def test_killed_after_summary_before_final_commit_is_resumable(tmp_path, monkeypatch):
    """Killed after the summary was written but before the final commit: the resumed run's logs
    and summary equal an uninterrupted twin's (same settings, seed), row for row."""
    real = WorkflowSearch._commit

    def dying_commit(self, learner):
        if self.state.finished:
            raise KeyboardInterrupt
        real(self, learner)

    out = tmp_path / "run"
    monkeypatch.setattr(WorkflowSearch, "_commit", dying_commit)
    with pytest.raises(KeyboardInterrupt):
        search(search_cfg(out, total_episodes=300), progress=quiet)
    monkeypatch.setattr(WorkflowSearch, "_commit", real)
    summary = search(resume_cfg(out), resume=True, progress=quiet)
    ref = search(search_cfg(tmp_path / "ref", total_episodes=300), progress=quiet)
    assert summary["episodes_used"] == ref["episodes_used"] == 300
    assert json.loads((out / "summary.json").read_text())["episodes_used"] == 300
    assert comparable(read_csv(out / "training_log.csv")) == \
        comparable(read_csv(tmp_path / "ref" / "training_log.csv"))
    assert read_csv(out / "gp_sampling_log.csv") == \
        read_csv(tmp_path / "ref" / "gp_sampling_log.csv")
    assert summary["top"] == ref["top"]


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
    r = run_cli("train", "--resume", str(run))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "older wfrl" in lines[0] and "version 2" in lines[0] and "Traceback" not in r.stderr
    assert (run / "search_state.pt").read_bytes() == before


def test_state_round_trips_and_a_missing_field_is_damage(tmp_path):
    import torch

    from wfrl.errors import UserError
    from wfrl.search.state import (
        STATE_VERSION,
        Measurement,
        Pick,
        Pretraining,
        SearchState,
        Visit,
        load_state,
        save_state,
    )
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
    # the state's JSON is what dataclasses.asdict gives (as_plain, without its deep copies)
    from dataclasses import asdict

    from wfrl.search.state import as_plain
    meta = json.loads(torch.load(path, weights_only=True)["meta"])
    assert json.dumps(meta) == json.dumps(json.loads(json.dumps(asdict(state))))
    assert json.dumps(as_plain(state)) == json.dumps(asdict(state))
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


def test_a_real_search_state_serialises_as_asdict_would(reference_run):
    # The state a real search ends with (visits, optimizer history, trained, lineage): as_plain
    # writes the JSON dataclasses.asdict would.
    from dataclasses import asdict

    from wfrl.search.state import STATE_FILE, as_plain, load_state
    state, _ = load_state(reference_run[0] / STATE_FILE)
    assert state.visits and state.optimizer
    assert json.dumps(as_plain(state)) == json.dumps(asdict(state))


def test_state_writer_commits_the_snapshot_taken_at_write_and_raises_a_failed_write(
        tmp_path, monkeypatch):
    # The search's commits are written on a background thread (StateWriter): what lands on disk
    # is the state and the learner's tensors as they were when write() was called, however
    # they change while the write is still waiting; a write that failed is raised by the next
    # write() or flush(), and settle() (an exception already on its way out) does not raise.
    import threading

    import torch

    from wfrl.errors import RecordWriteError
    from wfrl.search import state as state_mod
    from wfrl.search.state import SearchState, StateWriter, load_state
    gate, real = threading.Event(), state_mod._write_state

    def held(*args):
        assert gate.wait(10)
        return real(*args)
    monkeypatch.setattr(state_mod, "_write_state", held)
    writer = StateWriter()
    state = SearchState(episodes_used=250, updates=5, trained={7: 150})
    weights = torch.arange(6, dtype=torch.float32)
    path = tmp_path / "search_state.pt"
    writer.write(path, state, {"model": {"w": weights}, "optimizer": {"state": [weights * 2]}})
    assert not path.exists()              # still waiting: write() did not
    weights.add_(100.0)                   # the learner goes on (in place) ...
    state.episodes_used, state.trained[7] = 300, 200     # ... and so does the search
    gate.set()
    writer.flush()
    loaded, learner = load_state(path)
    assert (loaded.episodes_used, loaded.trained) == (250, {7: 150})
    assert learner["model"]["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert learner["optimizer"]["state"][0].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    missing = tmp_path / "gone" / "search_state.pt"     # its directory does not exist
    writer.write(missing, state, None)
    with pytest.raises(RecordWriteError, match="gone/search_state.pt: No such file"):
        writer.flush()
    writer.write(missing, state, None)
    with pytest.raises(RecordWriteError, match="gone/search_state.pt: No such file"):
        writer.write(path, state, None)   # raised by the next write
    writer.write(missing, state, None)
    writer.settle()                       # waits, and does not raise
    writer.write(path, state, None)
    writer.flush()
    assert load_state(path)[0].episodes_used == 300
