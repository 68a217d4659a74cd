"""`--config FILE` on every command: a TOML file of settings, or a run directory's saved settings,
fills what the command line leaves out (flags win); the run it starts is the run the same
flags start; a bad file is one line and exit 2, before torch is imported."""
import csv
import os
import subprocess
import sys

import pytest

import wfrl
from wfrl.cli.parser import build_parser
from wfrl.training.steps import TIMING_COLUMNS


def _log(path):
    rows = list(csv.DictReader(open(path)))
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def _wfrl(*argv, check=True):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
    res = subprocess.run([sys.executable, "-m", "wfrl", *map(str, argv)], capture_output=True,
                         text=True, env=env, timeout=600)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def _commands(parser, prefix=()):
    import argparse
    sub = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not sub:
        yield prefix, parser
        return
    for name, p in sub[0].choices.items():
        yield from _commands(p, prefix + (name,))


def test_every_command_takes_config():
    cmds = list(_commands(build_parser()))
    assert len(cmds) >= 10
    for name, p in cmds:
        assert "--config" in p._option_string_actions, name


def test_a_toml_file_starts_the_run_its_flags_start_and_a_run_dir_repeats_it(tmp_path):
    flags = ["--workflow", "reverse", "--total-episodes", 400, "--seed", 7]
    _wfrl("train", *flags, "--out", tmp_path / "cli")
    (tmp_path / "run.toml").write_text(
        'workflow = "reverse"\ntotal-episodes = 400\n[ppo]\n' + "seed = 7\n")
    _wfrl("train", "--config", tmp_path / "run.toml", "--out", tmp_path / "toml")
    want = _log(tmp_path / "cli" / "training_log.csv")
    assert len(want) > 0
    assert _log(tmp_path / "toml" / "training_log.csv") == want
    # the run directory's saved settings as the config: the same run again, elsewhere
    _wfrl("train", "--config", tmp_path / "cli", "--out", tmp_path / "again")
    assert _log(tmp_path / "again" / "training_log.csv") == want
    # and from Python
    res = wfrl.train(config=str(tmp_path / "cli" / "experiment_config.json"),
                     out=str(tmp_path / "api"))
    assert _log(os.path.join(res["run_dir"], "training_log.csv")) == want


def test_flags_win_over_the_file(tmp_path, capsys):
    from wfrl.cli import main
    (tmp_path / "e.toml").write_text('episodes = 3\nred-agent = "RedMeanderAgent"\n'
                                     'checkpoint = "pretrained:critical_first"\njson = true\n')
    assert main(["eval", "--config", str(tmp_path / "e.toml"), "--episodes", "2"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 2 and out["red_agent"] == "RedMeanderAgent"


@pytest.mark.parametrize("text, message", [
    ("epsodes = 3\n", "wfrl eval has no setting 'epsodes'"),
    ('episodes = "many"\n', "episodes: expected a whole number"),
    ("episodes = [1, 2]\n", "'episodes' must be a single value"),
    ("json = 1\n", "json must be true or false"),
    ("episodes = \n", "not valid TOML"),
    ("episodes = 3\nepisodes = 4\n", "not valid TOML"),
])
def test_a_bad_file_is_one_line_before_torch(tmp_path, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    code = ("import sys; from wfrl.cli import main; rc = main(['eval', '--config', sys.argv[1]]);"
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("wfrl: error:"), lines


def test_a_run_dir_goes_with_train_and_positionals_stay_on_the_command_line(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "experiment_config.json").write_text('{"seed": 3}')
    res = _wfrl("eval", "--config", tmp_path / "run", check=False)
    assert res.returncode == 2 and "go with wfrl train or wfrl exhaustive" in res.stderr
    (tmp_path / "c.toml").write_text('a = "x.jsonl"\n')
    res = _wfrl("compare", "p.jsonl", "q.jsonl", "--config", tmp_path / "c.toml", check=False)
    assert res.returncode == 2 and "an argument of the command line" in res.stderr


def test_a_missing_or_corrupt_run_dir_is_one_line(tmp_path):
    res = _wfrl("train", "--config", tmp_path / "nowhere", check=False)
    assert res.returncode == 2 and "no such file" in res.stderr
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "experiment_config.json").write_text("{not json")
    res = _wfrl("train", "--config", tmp_path / "run", check=False)
    assert res.returncode == 2 and "not valid JSON" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
