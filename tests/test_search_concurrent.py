"""Concurrent visits (--concurrent-visits K): the records depend on the seed and K alone, the pool
engine with one visit in flight is the serial search, a SIGKILLed K = 2 search resumes to its
uninterrupted twin, a killed worker costs a redo and nothing else, and the optimizer's batch rule
(pending visits believed at their posterior means) does what it says."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from _helpers import popen_wfrl, run_wfrl
from _search_helpers import assert_same_logs, quiet, run_cli, search_cfg

from wfrl.runlog import load_checkpoint, read_csv
from wfrl.search.loop import WorkflowSearch

pytestmark = pytest.mark.slow


def _search(out, pooled=None, **kw):
    cfg = search_cfg(out, **{"total_episodes": 900, **kw})
    return WorkflowSearch(cfg, progress=quiet, pooled=pooled).run_search()


def _k2_reference():
    """(folder, summary) of the search with two visits in flight, run once per test session and
    shared by the tests that hold another run to it (its records only read)."""
    from _helpers import made_once, session_folder

    def make():
        out = session_folder("search_k2") / "run"
        return out, _search(out, concurrent_visits=2)
    return made_once("search_k2", make)


def _same_checkpoints(a, b):
    names = sorted(p.name for p in (a / "checkpoints").glob("*.pt"))
    assert names == sorted(p.name for p in (b / "checkpoints").glob("*.pt"))
    for name in names:
        ca, cb = load_checkpoint(a / "checkpoints" / name), load_checkpoint(b / "checkpoints" / name)
        assert ca["episodes"] == cb["episodes"], name
        for key, tensor in ca["model"].items():
            assert np.array_equal(tensor.numpy(), cb["model"][key].numpy()), (name, key)


def test_pool_engine_with_one_visit_in_flight_is_the_serial_search(tmp_path):
    """The engine of concurrent visits (reservations, episode numbering, visits in worker
    processes, told in order) with K = 1 gives the serial search's records exactly."""
    serial, pooled = tmp_path / "serial", tmp_path / "pooled"
    s1 = _search(serial)
    s2 = _search(pooled, pooled=True)
    assert_same_logs(pooled, serial)
    _same_checkpoints(pooled, serial)
    assert s1["episodes_used"] == s2["episodes_used"] == 900
    assert s1["top"] == s2["top"]


def test_two_in_flight_twice_gives_identical_records(tmp_path):
    (a, sa), b = _k2_reference(), tmp_path / "b"
    sb = _search(b, concurrent_visits=2)
    assert_same_logs(a, b)
    _same_checkpoints(a, b)
    assert sa["top"] == sb["top"] and sa["episodes_used"] == sb["episodes_used"] == 900
    rows = read_csv(a / "gp_sampling_log.csv")
    assert [int(r["Iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    totals = [int(r["Total_Episodes_Sampled"]) for r in rows]
    assert totals == sorted(totals) and totals[-1] == 900
    assert not list((a / "checkpoints").glob("start_*.pt"))   # no visit left in flight
    # the training log counts the visits' updates in visit order, without gaps
    log = read_csv(a / "training_log.csv")
    counts = [int(r["Total_Episodes_Sampled"]) for r in log]
    assert counts == sorted(set(counts)) and counts[-1] == 900


def _cli_args(out, k):
    return [sys.executable, "-m", "wfrl", "train", "--total-episodes", "900",
            "--max-episodes", "300", "--min-episodes", "100", "--episodes-per-update", "50",
            "--compliance-threshold", "0.25", "--patience", "4", "--collector", "sequential",
            "--pretrain-episodes", "100", "--compliance-eval-episodes", "20",
            "--inherit", "closest", "--red-agent", "B_lineAgent", "--visit-eval", "training",
            "--gp-eval-episodes", "0", "--lr-final", "1", "--entropy-final", "1",
            "--first-fix-bonus", "--seed", "3", "--hidden", "32", "--epochs", "2",
            "--concurrent-visits", str(k), "--out", str(out)]


def test_sigkill_mid_visit_then_resume_matches_uninterrupted_run(tmp_path):
    (twin, _), out = _k2_reference(), tmp_path / "run"
    proc = popen_wfrl(*_cli_args(out, 2)[3:], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, start_new_session=True)
    log = out / "gp_sampling_log.csv"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) > 2:   # two visits told
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)        # the driver; its workers follow (PDEATHSIG)
    proc.wait()
    deadline = time.time() + 30
    while _session(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _session(proc.pid), "workers outlived their driver"
    from wfrl.search.state import load_state
    state, _ = load_state(out / "search_state.pt")
    assert state.pending, "killed with no visit in flight"
    done = run_wfrl("train", "--resume", out, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming" in done.stderr
    assert_same_logs(out, twin)
    _same_checkpoints(out, twin)


def _session(sid: int) -> list[int]:
    """Live processes of session `sid` (the killed driver started it)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def test_a_killed_worker_costs_a_redo_not_the_search(tmp_path, monkeypatch):
    """SIGKILL to a visit's worker process mid-visit: the pool starts again and the search ends
    with the records of one never disturbed."""
    (ref, _), out = _k2_reference(), tmp_path / "run"
    from wfrl.search import concurrent
    real = concurrent.LocalVisitPool.result
    killed = []

    def result(self, key):
        if not killed:
            time.sleep(0.3)   # the visits are under way
            pids = self.pids()
            assert pids
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
        return real(self, key)

    monkeypatch.setattr(concurrent.LocalVisitPool, "result", result)
    _search(out, concurrent_visits=2)
    assert killed
    assert_same_logs(out, ref)


def test_bad_concurrency_flags_are_one_line(tmp_path):
    for args, words in ((["--concurrent-visits", "0"], "must be positive"),
                        (["--concurrent-visits", "2", "--collector", "ray"], "collector of its own")):
        res = run_cli("train", "--out", str(tmp_path / "x"), *args)
        assert res.returncode != 0
        assert words in res.stderr and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
