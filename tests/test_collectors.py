"""Every collector hands the learner the same batch layout; sync and async produce exactly the
sequential collector's episodes (all episodes are seeded by their global number); a worker killed
mid-collection costs a re-run, never a half-written episode; nothing is left in /dev/shm."""
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
from _helpers import live_session_processes, perturbed_weights, popen_wfrl

from wfrl.collect.base import Collector, make_collector
from wfrl.collect.shm import SharedArrays, WeightsBoard, leaked_segments
from wfrl.workflow import Workflow

WF = Workflow.parse("critical_first")


def _collect(name, backend, n, first=7, n_workers=2, kill=False, spread=False, tasks=None):
    c = make_collector(name, backend, "RedMeanderAgent", 32, 5, 1.5, False, n_workers, n)
    assert isinstance(c, Collector)
    try:
        killer = _Killer(c) if kill else None
        if tasks is not None:            # count the tasks the async collector submits
            submit = c.pool.submit
            c.pool.submit = lambda *a, **k: (tasks.append(len(a[1])), submit(*a, **k))[1]
        stats = c.collect(perturbed_weights(), 3, WF, first, n, spread=spread)
        if killer:
            killer.join()
            assert killer.killed, "no worker was caught mid-episode"
            assert c.rebuilds >= 1
        arrays = {k: v.copy() for k, v in c.buffer.arrays.items()}
        return stats, arrays
    finally:
        c.close()


class _Killer(threading.Thread):
    """SIGKILLs one worker as soon as some row is half written."""

    def __init__(self, collector):
        super().__init__(daemon=True)
        self.c, self.killed = collector, False
        self.start()

    def _pids(self):
        if hasattr(self.c, "procs"):
            return [p.pid for p in self.c.procs]
        pool = self.c.pool
        return [p.pid for p in getattr(pool, "_processes", {}).values()] if pool else []

    def run(self):
        lengths = self.c.buffer.arrays["lengths"]
        deadline = time.time() + 60
        while time.time() < deadline:
            if ((lengths > 0) & (lengths < 100)).any() and self._pids():
                os.kill(self._pids()[0], signal.SIGKILL)
                self.killed = True
                return
            time.sleep(0.002)


def _same_batches(a, b):
    (sa, aa), (sb, ab) = a, b
    assert [s.episode for s in sa] == [s.episode for s in sb]
    for x, y in zip(sa, sb):
        assert (x.fixes, x.compliant_fixes) == (y.fixes, y.compliant_fixes)
        assert x.env_return == pytest.approx(y.env_return, abs=1e-3)
        assert x.alignment == pytest.approx(y.alignment, abs=1e-5)
    for name in ("obs", "actions", "dones", "red_access", "lengths"):
        np.testing.assert_array_equal(aa[name], ab[name], err_msg=name)
    for name in ("logprobs", "values", "rewards"):
        np.testing.assert_allclose(aa[name], ab[name], atol=1e-5, err_msg=name)


@pytest.mark.parametrize("name", ["sync", "async"])
def test_parallel_collectors_equal_sequential_on_sim(name):
    n = 37  # not a multiple of workers or chunks
    seq = _collect("sequential", "sim", n)
    par = _collect(name, "sim", n)
    assert (seq[1]["lengths"] == 100).all()
    _same_batches(seq, par)
    assert not leaked_segments(os.getpid())


def test_a_spread_batch_is_the_same_batch_on_every_worker():
    # spread=True (the caller waits with nothing else to do): the async collector splits a
    # simulator batch into one task per worker instead of one task of up to 64 episodes — the
    # same episodes, rows and statistics as the sequential collector's.
    n = 37
    seq = _collect("sequential", "sim", n, spread=True)
    one, split = [], []
    _same_batches(seq, _collect("async", "sim", n, tasks=one))
    _same_batches(seq, _collect("async", "sim", n, spread=True, tasks=split))
    assert (one, split) == ([37], [19, 18])
    assert not leaked_segments(os.getpid())


@pytest.mark.slow
@pytest.mark.cyborg
@pytest.mark.parametrize("name", ["sync", "async"])
def test_parallel_collectors_equal_sequential_on_cyborg(name):
    seq = _collect("sequential", "cyborg", 4)
    _same_batches(seq, _collect(name, "cyborg", 4))


@pytest.mark.slow
@pytest.mark.cyborg
@pytest.mark.parametrize("name", ["sync", "async"])
def test_killed_worker_yields_complete_correct_batch(name):
    seq = _collect("sequential", "cyborg", 6)
    par = _collect(name, "cyborg", 6, kill=True)
    _same_batches(seq, par)
    assert not leaked_segments(os.getpid())


def test_shared_arrays_unlinked_on_close_and_exception():
    with pytest.raises(RuntimeError, match="boom"):
        with SharedArrays({"x": ((4,), np.float32)}) as s:
            name = s.name
            assert os.path.exists(f"/dev/shm/{name}")
            raise RuntimeError("boom")
    assert not os.path.exists(f"/dev/shm/{name}")


def test_weights_board_versions():
    with SharedArrays({"weights": ((5,), np.float32), "weights_seq": ((2,), np.int64)}) as s:
        board = WeightsBoard(s.arrays)
        board.publish(np.arange(5, dtype=np.float32), 7)
        out = np.zeros(5, np.float32)
        assert board.read_into(out) == 7 and out.tolist() == [0, 1, 2, 3, 4]




@pytest.mark.system_wide   # compares /dev/shm before and after
@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, None)])
@pytest.mark.parametrize("collector", ["sync", "async"])
def test_interrupt_leaves_no_processes_and_no_shared_memory(tmp_path, sig, code, collector):
    before = set(os.listdir("/dev/shm"))
    proc = popen_wfrl(
        "train", "--collector", collector, "--n-workers", "2", "--total-episodes", "10000000",
        "--episodes-per-update", "200", "--out", tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # a workflow search (the default of `wfrl train`): wait for the first update's line,
        # i.e. workers up and collecting
        line = proc.stderr.readline()
        while line and "| update" not in line:
            line = proc.stderr.readline()
        assert "| update" in line, line
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    if code is not None:
        assert proc.returncode == code, err
    else:
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert err.strip().splitlines()[-1] == "wfrl: terminated (signal 15)"
    assert "Traceback" not in err
    assert live_session_processes(proc.pid) == []
    assert not leaked_segments(proc.pid)
    assert set(os.listdir("/dev/shm")) - before == set()  # no segment, no semaphore
    assert (tmp_path / "training_log.csv").read_text().count("\n") >= 2


@pytest.mark.parametrize("name", ["sync", "async"])
def test_workers_yield_to_the_learner(name):
    # The workers of the local parallel collectors run WORKER_NICE below this process's priority
    # (with overlap they play the next batch while the learner updates on the cores they share).
    from wfrl.collect.worker import WORKER_NICE
    c = make_collector(name, "sim", "RedMeanderAgent", 32, 5, 1.5, False, 2, 8)
    try:
        c.collect(perturbed_weights(), 3, WF, 0, 8)     # (the async pool starts its workers now)
        want = min(os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICE, 19)
        deadline = time.monotonic() + 20     # (a worker lowers it once started: poll)
        while True:
            pids = c.worker_pids()
            got = [os.getpriority(os.PRIO_PROCESS, p) for p in pids]
            if (pids and got == [want] * len(pids)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert pids and got == [want] * len(pids)
    finally:
        c.close()
