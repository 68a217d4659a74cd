"""Runs protect themselves: one process per run directory (a second train, --resume or
exhaustive on a directory in use is refused in one line; a lock left by a SIGKILLed run is not),
and worker counts this machine cannot hold are refused before any worker starts."""
import os
import signal
import subprocess
import time

import pytest
from _helpers import popen_wfrl, run_wfrl

from wfrl.collect.resources import WORKER_MB, available_mb, check_workers_fit
from wfrl.errors import UserError
from wfrl.runlog import LOCK_FILE, RunLock, read_csv

SEARCH = ["train", "--pretrain-episodes", "200", "--total-episodes", "200000",
          "--episodes-per-update", "50", "--collector", "sequential", "--hidden", "16",
          "--epochs", "1"]


def _wfrl(*args, timeout=120):
    return run_wfrl(*args, timeout=timeout)


def _one_line(res, fragment):
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wfrl: error: "), res.stderr
    assert fragment in lines[0], lines[0]


def _start_search(out):
    proc = popen_wfrl(*SEARCH, "--out", out, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                      text=True)
    deadline = time.time() + 120
    while time.time() < deadline:   # running: at least two updates logged
        log = out / "training_log.csv"
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            return proc
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the search did not start")


def test_lock_is_exclusive_and_released(tmp_path):
    with RunLock(tmp_path) as lock:
        with pytest.raises(UserError, match=f"in use by another wfrl process \\(pid {os.getpid()}"):
            RunLock(tmp_path)
        assert (tmp_path / LOCK_FILE).read_text().strip() == str(os.getpid())
    RunLock(tmp_path).release()          # free again once released
    assert lock._fd is None


@pytest.mark.slow
def test_a_second_process_on_a_run_directory_in_use_is_refused(tmp_path):
    out = tmp_path / "run"
    proc = _start_search(out)
    try:
        _one_line(_wfrl("train", "--resume", out), f"{out} is in use by another wfrl process "
                                                  f"(pid {proc.pid})")
        _one_line(_wfrl("train", "--workflow", "critical_first", "--out", out, "--force"),
                  "is in use")
        _one_line(_wfrl("exhaustive", "--out", out, "--pretrain-episodes", "0"), "is in use")
        assert proc.poll() is None                      # the running search is untouched
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    rows = read_csv(out / "training_log.csv")
    sampled = [int(r["Total_Episodes_Sampled"]) for r in rows]
    assert sampled == sorted(set(sampled)) and len(sampled) >= 3   # one writer only
    assert not (out / "exhaustive.csv").exists()


@pytest.mark.slow
def test_a_lock_left_by_a_killed_run_does_not_block_resume(tmp_path):
    out = tmp_path / "run"
    proc = _start_search(out)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert (out / LOCK_FILE).read_text().strip() == str(proc.pid)   # the stale lock file
    # resume for real, and stop it once it has trained past the kill: it got past the lock
    before = len(read_csv(out / "training_log.csv"))
    proc = popen_wfrl("train", "--resume", out, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if len(read_csv(out / "training_log.csv")) > before + 1:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.stderr.read()
        assert len(read_csv(out / "training_log.csv")) > before + 1
        assert (out / LOCK_FILE).read_text().strip() == str(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "resuming" in err and "in use" not in err


def test_check_workers_fit_refuses_what_cannot_fit():
    check_workers_fit("async", "cyborg", 8, available=24 * 1024)
    with pytest.raises(UserError, match="400 cyborg workers .* need about 31.8 GB .* 24.0 GB "
                                        "available; 299 workers fit"):
        check_workers_fit("sync", "cyborg", 400, available=24 * 1024)
    with pytest.raises(UserError, match="workers fit"):
        check_workers_fit("async", "sim", 500, available=24 * 1024)
    check_workers_fit("sequential", "cyborg", 500, available=1)       # no workers
    check_workers_fit("ray", "cyborg", 500, "127.0.0.1:6379", available=1)  # on the cluster
    with pytest.raises(UserError, match=r"--n-workers 500: 500 cyborg workers \(ray\) need about "):
        check_workers_fit("ray", "cyborg", 500, available=24 * 1024)     # private instance: here
    assert available_mb() > 0
    assert set(WORKER_MB) >= {(b, c) for b in ("sim", "cyborg") for c in ("sync", "async", "ray")}


@pytest.mark.parametrize("cmd", [
    ["train", "--workflow", "critical_first", "--collector", "async"],
    ["train", "--collector", "sync"],
    ["exhaustive", "--collector", "async"],
])
def test_an_impossible_n_workers_is_refused_before_any_worker_starts(tmp_path, cmd):
    out = tmp_path / "run"
    t = time.perf_counter()
    res = _wfrl(*cmd, "--n-workers", "500", "--out", out)
    _one_line(res, "--n-workers 500: 500 sim workers")
    assert "workers fit" in res.stderr
    assert not out.exists()                  # nothing written, nothing started
    assert time.perf_counter() - t < 60


def test_available_memory_respects_a_cgroup_limit(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n")
    cg = tmp_path / "cg"
    cg.mkdir()
    assert available_mb(str(tmp_path / "meminfo"), str(cg)) == 20480          # no cgroup files
    (cg / "memory.max").write_text("max\n")
    (cg / "memory.current").write_text("1048576\n")
    assert available_mb(str(tmp_path / "meminfo"), str(cg)) == 20480          # unlimited
    (cg / "memory.max").write_text(f"{4 * 2**30}\n")
    assert available_mb(str(tmp_path / "meminfo"), str(cg)) == 4095           # 4 GB − 1 MB used
    assert available_mb(str(tmp_path / "none"), str(tmp_path / "none")) is None
