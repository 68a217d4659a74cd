"""Stress: every multi-process path of wfrl under adverse conditions made here, round after round.

Each round drives one path as a user's command (a subprocess in its own session) while this test
makes life hard for it: its stderr is a pipe read slowly (a reader that sleeps between small
reads), the command and every process it starts share one core (as if a CPU-bound neighbour held
the rest; the on-demand form also runs a real neighbour in half its rounds), and the workers sleep
a random 0..N ms at their busy points (WFRL_TEST_WORKER_DELAY_MS, a test-only hook of
wfrl.collect.worker, off by default). Interrupt rounds send SIGINT or SIGTERM at a random moment
and then resume the run to its end. Every round asserts: no stall past its bound, the exact episode
counts, nothing left in /dev/shm and no process left in the command's session.

    pytest tests/test_stress.py                 # the bounded form (CI): one round of each path
    python tests/test_stress.py 100 [SEED]      # on demand: 100 rounds of random paths
"""
import contextlib
import csv
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _helpers import live_session_processes

from wfrl.collect.shm import leaked_segments

AGENTS = Path(__file__).parent / "agents" / "cage2_agents.py"
STALL_S = 120          # no round may take longer (they take 5-40 s)
DELAY_MS = "5"


class SlowReader:
    """Reads a pipe slowly: `chunk` bytes, then a sleep of `pause` seconds, until EOF."""

    def __init__(self, pipe, chunk=512, pause=0.05, start_after=0.0):
        self.pipe, self.data = pipe, bytearray()
        self.chunk, self.pause, self.start_after = chunk, pause, start_after
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        time.sleep(self.start_after)
        while True:
            b = self.pipe.read1(self.chunk) if hasattr(self.pipe, "read1") else self.pipe.read(
                self.chunk)
            if not b:
                return
            self.data += b
            time.sleep(self.pause)

    def text(self, timeout=30):
        self.thread.join(timeout)
        return self.data.decode("utf-8", "replace")


class Neighbour:
    """A CPU-bound process beside the round."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


_ONE_CORE: set[int] = set()   # the core the pytest form confines each command to (empty: none)


@contextlib.contextmanager
def one_core():
    """Commands started inside are confined (with every process they start, by inheritance) to
    one core: each must hold up with its workers, threads and Ray's daemons taking turns there."""
    _ONE_CORE.add(min(os.sched_getaffinity(0)))
    try:
        yield
    finally:
        _ONE_CORE.clear()


def _pin():   # runs in the child between fork and exec
    os.sched_setaffinity(0, _ONE_CORE)


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "WFRL_TEST_OUTPUT_NO_DRAIN"}
    return {**env, "WFRL_TEST_WORKER_DELAY_MS": DELAY_MS, **extra}


def _start(args, env, cwd):
    proc = subprocess.Popen([sys.executable, "-m", "wfrl", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True,
                            preexec_fn=_pin if _ONE_CORE else None)
    assert not _ONE_CORE or os.sched_getaffinity(proc.pid) == _ONE_CORE
    return proc


def _finish(proc, bound, reader=None):
    """Wait for the command within `bound` seconds; (stdout, stderr) as text. A stall kills the
    session and fails the round."""
    out_reader = SlowReader(proc.stdout, chunk=1 << 16, pause=0.0)
    err_reader = reader or SlowReader(proc.stderr, chunk=1 << 16, pause=0.0)
    t0 = time.monotonic()
    try:
        proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"stalled: {' '.join(map(str, proc.args[2:]))} still running after "
                    f"{bound} s\n{err_reader.text(5)[-2000:]}")
    exited = time.monotonic() - t0
    out, err = out_reader.text(), err_reader.text()
    # the pipes close once every process holding them is gone: the command's children too
    assert not out_reader.thread.is_alive() and not err_reader.thread.is_alive(), \
        f"a process outlived the command by 30 s with its output open: " \
        f"{live_session_processes(proc.pid, wait=0)}"
    late = time.monotonic() - t0 - exited
    assert late < 10, f"the output closed {late:.1f} s after the command exited"
    return out, err


def _clean(proc):
    assert live_session_processes(proc.pid) == [], "processes left in the command's session"
    assert not leaked_segments(proc.pid), "shared memory left"


def agent_round(rng, tmp, workers=2, backend="sim", episodes=2):
    """A chatty agent scored by `eval --cage2` on 2 workers, stderr read slowly."""
    proc = _start(["eval", "--cage2", "--backend", backend, "--agent", f"{AGENTS}:chatty",
                   "--n-workers", str(workers), "--episodes", str(episodes), "--json",
                   "--action-timeout", "5"], _env(), tmp)
    slow = SlowReader(proc.stderr, chunk=4096, pause=0.01, start_after=rng.uniform(2, 6))
    out, err = _finish(proc, STALL_S, reader=slow)
    assert proc.returncode == 0, err[-2000:]
    res = json.loads(out)
    assert [s["n"] for s in res["settings"]] == [episodes] * 9
    assert "[agent worker 1] chatty: x" in err and "xxxx" not in out and "yyyy" not in out
    _clean(proc)


def interrupt_round(rng, tmp, collector):
    """A short search on a parallel collector, SIGINT or SIGTERM at a random moment, then resumed
    to its end: exact episode count, exit codes, nothing left behind."""
    run = tmp / f"run-{collector}"
    budget = ["--pretrain-episodes", "1000", "--total-episodes", "1200",
              "--episodes-per-update", "200", "--max-episodes", "200", "--min-episodes", "200",
              "--gp-eval-episodes", "5", "--max-evaluations", "1"]
    proc = _start(["train", "--collector", collector, "--n-workers", "2", "--seed",
                   str(rng.randrange(1000)), "--out", str(run), *budget], _env(), tmp)
    line = proc.stderr.readline()
    while line and b"| update" not in line:
        line = proc.stderr.readline()
    assert b"| update" in line, line
    time.sleep(rng.uniform(0, 1.5))
    sig = rng.choice([signal.SIGINT, signal.SIGTERM])
    proc.send_signal(sig)
    _, err = _finish(proc, 30)
    # 0: the run ended before the signal landed
    assert proc.returncode in (0, 130 if sig == signal.SIGINT else 143), \
        f"exit {proc.returncode} after {sig.name}: {err[-2000:]}"
    assert "Traceback" not in err, err[-3000:]
    _clean(proc)
    if proc.returncode != 0:
        again = _start(["train", "--resume", str(run)], _env(), tmp)
        _, err = _finish(again, STALL_S)
        assert again.returncode == 0, err[-2000:]
        _clean(again)
    summary = json.loads((run / "summary.json").read_text())
    with open(run / "training_log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    totals = [int(r["Total_Episodes_Sampled"]) for r in rows]
    # every update logged once, in order, and together they are the run's episodes exactly
    assert totals == sorted(set(totals)) and totals[-1] <= 1200
    steps = [b - a for a, b in zip([0] + totals, totals)]
    assert all(n == 200 for n in steps), steps
    assert summary["episodes_used"] == totals[-1]


def ray_round(rng, tmp):
    """A single-workflow run on the Ray collector with delayed actors and a slow stderr."""
    pytest.importorskip("ray")
    run = tmp / "ray-run"
    proc = _start(["train", "--workflow", "critical_first", "--collector", "ray", "--n-workers",
                   "2", "--total-episodes", "400", "--episodes-per-update", "100",
                   "--eval-every", "0", "--seed", str(rng.randrange(1000)), "--out", str(run)],
                  _env(), tmp)
    slow = SlowReader(proc.stderr, chunk=128, pause=0.05)
    _, err = _finish(proc, STALL_S, reader=slow)
    assert proc.returncode == 0, err[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == 400
    _clean(proc)


KINDS = {"agent": agent_round,
         "sync": lambda rng, tmp: interrupt_round(rng, tmp, "sync"),
         "async": lambda rng, tmp: interrupt_round(rng, tmp, "async"),
         "ray": ray_round}


@pytest.mark.slow
@pytest.mark.system_wide     # compares /dev/shm: nothing else beside it
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_one_round_of_each_path(kind, tmp_path):
    before = set(os.listdir("/dev/shm"))
    with one_core():
        KINDS[kind](random.Random(f"{kind}-0"), tmp_path)
    assert set(os.listdir("/dev/shm")) - before == set()   # no segment, no semaphore


def test_planted_no_drain_brings_the_agent_stall_back(tmp_path):
    """The planted defect (workers on the inherited stderr, as before the drain): the chatty
    agent, its stderr unread for a while, is blamed for a hang."""
    env = _env(WFRL_TEST_OUTPUT_NO_DRAIN="1")
    env.pop("WFRL_TEST_WORKER_DELAY_MS")
    proc = _start(["eval", "--cage2", "--backend", "sim", "--agent", f"{AGENTS}:chatty",
                   "--n-workers", "1", "--episodes", "2", "--json", "--action-timeout", "1"],
                  env, tmp_path)
    slow = SlowReader(proc.stderr, chunk=1 << 16, pause=0.0, start_after=4.0)
    _, err = _finish(proc, 60, reader=slow)
    assert proc.returncode == 2 and "hung: no action within 1 s" in err, err[-500:]


def rounds(n: int, seed: int = 0) -> None:
    """n rounds, each of a random path, half of them beside a neighbour (the on-demand form;
    other processes may run beside it)."""
    import tempfile
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="wfrl-stress-") as top:
        for i in range(n):
            kind = rng.choice(sorted(KINDS))
            t0 = time.monotonic()
            tmp = Path(top) / f"round{i}"
            tmp.mkdir()
            if rng.random() < 0.5:
                with Neighbour():
                    KINDS[kind](rng, tmp)
            else:
                KINDS[kind](rng, tmp)
            print(f"round {i + 1}/{n}: {kind} ok in {time.monotonic() - t0:.1f} s", flush=True)
    # (each round checked its own command's segments and processes; a whole-machine comparison
    # of /dev/shm, as the pytest form makes alone on the machine, would count whatever else runs)
    print(f"{n} rounds, no stall, nothing of theirs left behind")


if __name__ == "__main__":     # python tests/test_stress.py [ROUNDS [SEED]]
    sys.path.insert(0, str(Path(__file__).parent))
    rounds(int(sys.argv[1]) if len(sys.argv) > 1 else 100,
           int(sys.argv[2]) if len(sys.argv) > 2 else 0)
