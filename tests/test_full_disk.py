"""A disk that fills while a run writes its records: the run ends with one line naming the file
and the fix, exit status 2, what it committed stays whole, and --resume finishes the run once
there is space again. On a real 1.2 MB tmpfs where the test may mount one (root), and always with
the disk's failure injected at the point every record write goes through (fsync)."""
import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from _helpers import run_wfrl

ROOT = pathlib.Path(__file__).resolve().parents[1]
# a small search: 500 pretraining episodes, then visits, 1,500 episodes in all
SEARCH = ["train", "--total-episodes", "1500", "--pretrain-episodes", "500", "--min-episodes", "200",
          "--collector", "sequential", "--seed", "5"]

# The CLI with os.fsync failing with ENOSPC, as on a full disk, for the files whose name contains
# FULL_FILE from the FULL_AFTER-th such call on: a CSV row, a checkpoint, the search's state on
# its writer thread fail as they would.
_INJECTED = """
import errno, os, sys
name, limit, calls, real = os.environ["FULL_FILE"], int(os.environ["FULL_AFTER"]), [0], os.fsync
def fsync(fd):
    if name in os.readlink(f"/proc/self/fd/{fd}"):
        calls[0] += 1
        if calls[0] >= limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real(fd)
os.fsync = fsync
from wfrl.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _wfrl(args, env=None, injected=False):
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    if not injected:
        return run_wfrl(*args, cwd=ROOT, env=env)
    return subprocess.run([sys.executable, "-c", _INJECTED, *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=600)


def _check_stopped_cleanly(out, run):
    assert out.returncode == 2, out.stderr[-2000:]
    # progress lines go to stderr too: the error is its last line, and its only wfrl: line
    lines = out.stderr.strip().splitlines()
    errors = [x for x in lines if x.startswith("wfrl:")]
    assert len(errors) == 1 and lines[-1] == errors[0], out.stderr[-2000:]
    line = errors[0]
    assert line.startswith(f"wfrl: error: cannot write {run}/"), line
    assert "No space left on device" in line and f"`wfrl train --resume {run}`" in line, line
    assert "Traceback" not in out.stdout + out.stderr
    # what was committed is whole: the state loads, and the logs hold at least its rows
    from wfrl.search.state import load_state
    if (run / "search_state.pt").exists():
        state, _ = load_state(run / "search_state.pt")
        assert state is not None
    assert not (run / "summary.json").exists()


def _check_resumed(out, run):
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())
    rows = list(csv.DictReader(open(run / "training_log.csv")))
    assert int(rows[-1]["Total_Episodes_Sampled"]) == 1500
    assert [int(r["Total_Episodes_Sampled"]) for r in rows] == sorted(
        {int(r["Total_Episodes_Sampled"]) for r in rows}), "a row repeated or lost across resume"


def _same_logs(a, b):
    drop = {"Collection_Time", "Update_Time", "Episodes_Per_Second"}
    for name in ("training_log.csv", "gp_sampling_log.csv"):
        x, y = ([{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(open(d / name))]
                for d in (a, b))
        assert x == y, name


def test_disk_full_mid_run_is_one_line_and_resume_finishes(tmp_path):
    # the search's state, written on its writer thread, fails at the 8th update's commit
    run = tmp_path / "run"
    out = _wfrl(SEARCH + ["--out", run], env={"FULL_FILE": "search_state.pt", "FULL_AFTER": "8"},
                injected=True)
    _check_stopped_cleanly(out, run)
    assert f"cannot write {run}/search_state.pt:" in out.stderr
    _check_resumed(_wfrl(["train", "--resume", run]), run)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1.2 MB tmpfs, where this test may mount one (root, mount available); else skipped."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "small"
    d.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(d)],
                      capture_output=True).returncode:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


@pytest.mark.slow
def test_a_real_full_disk_then_resume_matches_an_uninterrupted_run(small_tmpfs, tmp_path):
    run, whole = small_tmpfs / "run", tmp_path / "whole"
    out = _wfrl(SEARCH + ["--out", run])
    _check_stopped_cleanly(out, run)
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_tmpfs)], check=True)
    _check_resumed(_wfrl(["train", "--resume", run]), run)
    assert _wfrl(SEARCH + ["--out", whole]).returncode == 0
    _same_logs(run, whole)
