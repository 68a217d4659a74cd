"""`wfrl train --resume DIR` on a single-workflow run: SIGKILLed at any moment (mid-update, mid-
evaluation, across the warm-up's switch), the resumed run ends with its uninterrupted twin's
training_log.csv, eval_log.csv and summary (timing aside); a finished run or one of an older
wfrl is refused in one line."""
import csv
import json
import os
import signal
import subprocess

import pytest
from _helpers import popen_wfrl, run_wfrl

from wfrl.training.steps import TIMING_COLUMNS

FLAGS = ["--workflow", "critical_first", "--total-episodes", "2400", "--eval-every", "600",
         "--eval-episodes", "50", "--seed", "3", "--warmup", "800"]


def _run(*argv, check=True):
    res = run_wfrl("train", *argv)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def _rows(path):
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS}
            for r in csv.DictReader(open(path))]


def _killed_after(out, lines: int):
    """Start the run and SIGKILL it once it has printed `lines` progress lines."""
    proc = popen_wfrl("train", *FLAGS, "--out", out, stderr=subprocess.PIPE, text=True)
    seen = 0
    for line in proc.stderr:
        seen += line.startswith(("update", "evaluation"))
        if seen >= lines:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    out = tmp_path_factory.mktemp("twin")
    _run(*FLAGS, "--out", out)
    return out


@pytest.mark.parametrize("lines", [1, 4, 9])
def test_killed_run_resumes_to_its_twin(tmp_path, twin, lines):
    out = tmp_path / "run"
    _killed_after(out, lines)
    res = _run("--resume", out)
    assert "resuming" in res.stderr
    for name in ("training_log.csv", "eval_log.csv"):
        assert _rows(out / name) == _rows(twin / name), name
    a, b = (json.loads((d / "summary.json").read_text()) for d in (twin, out))
    assert {k: v for k, v in a.items() if k not in ("wall_time_s", "episodes_per_s")} == \
        {k: v for k, v in b.items() if k not in ("wall_time_s", "episodes_per_s")}


def test_resume_refusals(twin, tmp_path):
    res = _run("--resume", twin, check=False)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        f"wfrl: error: cannot resume: the run in {twin} is finished (summary.json)"]
    res = _run("--resume", twin, "--seed", 4, check=False)
    assert res.returncode == 2 and "--seed cannot be changed" in res.stderr
