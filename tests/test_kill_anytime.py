"""A worker SIGKILLed at any moment of the training loop — while the collector starts its
workers, while the learner updates (with overlap: while the next batch is collected) and right
after an update — is replaced, and the run finishes as if nothing happened: exit 0, no
traceback, the exact episode count, the same log and final weights as an undisturbed run, no
process and nothing in /dev/shm left. For each parallel collector, with and without overlap."""
import json
import subprocess
import sys

import pytest
from _helpers import live_session_processes

from wfrl.collect.shm import leaked_segments
from wfrl.runlog import load_checkpoint, read_csv
from wfrl.training.steps import TIMING_COLUMNS

EPISODES, PER_UPDATE = 400, 40

# Runs inside the training process: kills workers of the run's collector at the chosen moments,
# then hands over to the CLI.
DRIVER = r'''
import os, signal, sys, threading, time
import wfrl.training.run as run
from wfrl.cli import main
from wfrl.ppo.learner import PPOLearner

moment = sys.argv[1]
seen = {"collector": None, "updates": 0, "kills": 0}
real_make, real_update = run.make_collector, PPOLearner.update


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill(every=False):
    pids = []
    deadline = time.time() + 30
    while not pids and time.time() < deadline:
        pids = [p for p in seen["collector"].worker_pids() if alive(p)]
        time.sleep(0.002)
    for pid in (pids if every else pids[:1]):
        try:
            os.kill(pid, signal.SIGKILL)
            seen["kills"] += 1
        except ProcessLookupError:
            pass


def make(*args, **kw):
    seen["collector"] = real_make(*args, **kw)
    if moment == "all":      # while the workers start: as soon as the first one exists
        threading.Thread(target=kill, daemon=True).start()
    return seen["collector"]


def update(self, batch, *args, **kw):
    seen["updates"] += 1
    if moment == "all" and seen["updates"] in (2, 5):     # during the update (and, with
        kill(every=seen["updates"] == 5)                 # overlap, the next batch's collection)
    out = real_update(self, batch, *args, **kw)
    if moment == "all" and seen["updates"] in (3, 7):     # right after an update
        kill(every=seen["updates"] == 7)
    return out


run.make_collector, PPOLearner.update = make, update
code = main(sys.argv[2:])
print("KILLS", seen["kills"], file=sys.stderr)
sys.exit(code)
'''


def _run(tmp_path, name, collector, overlap, moment):
    out = tmp_path / name
    args = ["train", "--workflow", "critical_first", "--backend", "sim", "--collector", collector,
            "--n-workers", "2", "--red-agent", "mixed", "--total-episodes", str(EPISODES),
            "--episodes-per-update", str(PER_UPDATE), "--seed", "3", "--hidden", "16",
            "--epochs", "1", "--eval-every", "0", "--overlap" if overlap else "--no-overlap",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, moment, *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    proc.stdout_text, proc.stderr = proc.communicate(timeout=600)
    return out, proc


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    out, proc = _run(tmp_path_factory.mktemp("ref"), "ref", "sequential", True, "none")
    assert proc.returncode == 0, proc.stderr
    out2, proc2 = _run(tmp_path_factory.mktemp("ref"), "ref", "sequential", False, "none")
    assert proc2.returncode == 0, proc2.stderr
    return {True: out, False: out2}


def _comparable(out):
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS}
            for r in read_csv(out / "training_log.csv")]


# every parallel collector with overlap (the default), and without it the executor-async one,
# whose idle pool broke at the next submit before (without overlap a sync worker or Ray actor
# dies either mid-collection, as in tests/test_collectors.py and tests/test_ray.py, or while
# idle, which the next collect() finds the same way)
CASES = [("sync", True), ("async", True), ("async", False),
         pytest.param("ray", True, marks=pytest.mark.ray)]


@pytest.mark.slow
@pytest.mark.parametrize("collector,overlap", CASES)
def test_a_killed_worker_changes_nothing(tmp_path, undisturbed, collector, overlap):
    # one run, five kills: while the workers start, during updates 2 and 5 (all workers at 5),
    # right after updates 3 and 7 (all workers at 7)
    out, proc = _run(tmp_path, "run", collector, overlap, "all")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    kills = int(proc.stderr.rsplit("KILLS", 1)[1].split()[0])
    assert kills >= 5, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == EPISODES
    log = _comparable(out)
    assert [int(r["Episodes"]) for r in log] == list(range(PER_UPDATE, EPISODES + 1, PER_UPDATE))
    # every collector plays every episode from its number: the run is the undisturbed one
    ref = undisturbed[overlap]
    assert log == _comparable(ref)
    a, b = load_checkpoint(out / "checkpoint.pt"), load_checkpoint(ref / "checkpoint.pt")
    assert all(a["model"][k].equal(b["model"][k]) for k in a["model"])
    assert live_session_processes(proc.pid) == []   # its own session: sid = its pid
    assert leaked_segments(proc.pid) == []        # the run's segments (named by its pid)
