"""wfrl.train() / wfrl.search() are `python -m wfrl train` from Python: the same presets,
defaults and thread rule, so the same settings give the same training log (timing columns
aside) as the command; they return where the run and its policy are; bad settings raise the
command's one-line error; the thread settings they change are put back."""
import csv
import os
import subprocess
import sys

import pytest

import wfrl
from wfrl.errors import UserError
from wfrl.training.steps import TIMING_COLUMNS


def _log(path):
    rows = list(csv.DictReader(open(path)))
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def _command(*argv):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
    res = subprocess.run([sys.executable, "-m", "wfrl", "train", *map(str, argv)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("kind", ["workflow", "search"])
def test_python_api_gives_the_commands_log(tmp_path, kind):
    flags = (["--workflow", "critical_first", "--total-episodes", 600] if kind == "workflow" else
             ["--base", "pretrain", "--pretrain-episodes", 400, "--total-episodes", 1000,
              "--episodes-per-update", 100, "--max-episodes", 300])
    _command(*flags, "--seed", 5, "--out", tmp_path / "cli")
    settings = {flags[i].lstrip("-").replace("-", "_"): flags[i + 1]
                for i in range(0, len(flags), 2)}
    threads = os.environ.get("OMP_NUM_THREADS")
    fn = wfrl.train if kind == "workflow" else wfrl.search
    res = fn(**settings, seed=5, out=str(tmp_path / "api"))
    assert os.environ.get("OMP_NUM_THREADS") == threads     # put back
    assert _log(tmp_path / "api" / "training_log.csv") == _log(tmp_path / "cli" / "training_log.csv")
    assert res["run_dir"] == str(tmp_path / "api") and res["summary"]["episodes" if kind ==
                                                                      "workflow" else
                                                                      "episodes_used"] > 0
    if res["checkpoint"] is not None:
        assert os.path.exists(res["checkpoint"])
    if kind == "workflow":
        assert res["checkpoint"].endswith("checkpoint.pt")


def test_python_api_puts_the_thread_settings_back(tmp_path, monkeypatch):
    import torch
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = {}
    from wfrl.training import run as train_module
    real = train_module.train

    def spy(cfg, *a, **kw):
        seen.update(omp=os.environ.get("OMP_NUM_THREADS"), torch=torch.get_num_threads())
        return real(cfg, *a, **kw)
    monkeypatch.setattr(train_module, "train", spy)
    try:
        wfrl.train(workflow="critical_first", total_episodes=10, out=str(tmp_path / "r"))
        assert seen == {"omp": "1", "torch": 1}          # the command's rule while it runs
        assert "OMP_NUM_THREADS" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
        assert torch.get_num_threads() == 2              # and everything put back
    finally:
        torch.set_num_threads(before)


def test_python_api_refuses_bad_settings(tmp_path):
    with pytest.raises(UserError, match="no setting 'bogus'"):
        wfrl.train(bogus=1)
    with pytest.raises(UserError, match="belongs to the workflow search"):
        wfrl.train(workflow="critical_first", pretrain_episodes=5, out=str(tmp_path / "a"))
    with pytest.raises(UserError, match="use wfrl.train"):
        wfrl.search(workflow="critical_first")
    with pytest.raises(UserError, match="unknown unit type"):
        wfrl.train(workflow="nope", out=str(tmp_path / "b"))
