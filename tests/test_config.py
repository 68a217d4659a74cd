"""One source for settings: every config is a dataclass in wfrl.config whose fields carry their
default, their check and (as the attribute docstring) their help; the command line is generated
from them, validate() checks without changing anything, and neither --help nor an argument error
imports torch."""
import copy
import dataclasses
import math
import subprocess
import sys

import pytest

from wfrl.cli.parser import build_parser
from wfrl.config import eval as config_eval
from wfrl.config import fields, run
from wfrl.config import tools as config_tools
from wfrl.errors import UserError

CONFIGS = [run.PPOConfig, run.TrainConfig, run.SearchConfig, run.ExhaustiveConfig,
           config_eval.EvalConfig, config_eval.Cage2EvalConfig, config_tools.ParityConfig,
           config_tools.BenchCollectorsConfig, config_tools.BenchSearchConfig,
           config_tools.BenchTrainConfig]



def _subparsers(parser):
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            for name, sub in action.choices.items():
                yield name, sub
                yield from _subparsers(sub)


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_has_help_and_a_flag(cls):
    docs = fields.field_docs(cls)
    flags = set()
    for _, sub in _subparsers(build_parser()):
        for action in sub._actions:
            flags.update(action.option_strings)
    for f in dataclasses.fields(cls):
        if f.name == "ppo":
            continue
        assert docs.get(f.name), f"{cls.__name__}.{f.name} has no docstring (its --help text)"
        assert "--" + f.name.replace("_", "-") in flags, f"no flag for {cls.__name__}.{f.name}"


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_validate_changes_nothing(cls):
    kw = {"checkpoint": "x.pt"} if cls in (config_eval.EvalConfig, config_eval.Cage2EvalConfig) else {}
    if cls is config_tools.BenchSearchConfig:
        kw = {"planted": True}
    cfg = cls(**kw)
    before = copy.deepcopy(cfg)
    assert cfg.validate() is cfg
    assert cfg == before


@pytest.mark.parametrize("field,value,fragment", [
    ("seed", -1, "--seed must be a whole number"),
    ("seed", 2 ** 64, "--seed must be a whole number"),
    ("alignment_lambda", math.inf, "--alignment-lambda must be a finite number"),
    ("alignment_lambda", math.nan, "--alignment-lambda must be a finite number"),
    ("compliance_threshold", 1.5, "--compliance-threshold must lie in [0, 1]"),
    ("total_episodes", 0, "--total-episodes must be positive"),
    ("collector", "threads", "unknown collector 'threads' (choose from sequential, sync, async, ray)"),
    ("red_agent", "Blue", "unknown red agent 'Blue' (choose from B_lineAgent, RedMeanderAgent, "
                          "SleepAgent, DelayedB_lineAgent, "),
    ("workflow", "user,user,op_host,enterprise,defender",
     "unit type 'user' appears more than once in the workflow"),
    ("total_episodes", 10.5, "--total-episodes must be int (got 10.5)"),
])
def test_each_field_is_checked_where_declared(field, value, fragment):
    with pytest.raises(UserError) as err:
        dataclasses.replace(run.TrainConfig(), **{field: value}).validate()
    assert fragment in str(err.value)


def test_nested_ppo_settings_are_checked():
    for field, value in (("lr", 0.0), ("gamma", 1.5), ("clip", 1.0), ("lr", math.inf),
                         ("epochs", 0)):
        cfg = run.SearchConfig(ppo=dataclasses.replace(run.PPOConfig(), **{field: value}))
        with pytest.raises(UserError, match="--" + field.replace("_", "-")):
            cfg.validate()


def test_from_dict_round_trip_and_refusals():
    cfg = run.SearchConfig(seed=3, ppo=run.PPOConfig(hidden=32))
    assert run.SearchConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(UserError, match="unknown setting 'bogus'"):
        run.SearchConfig.from_dict({**cfg.to_dict(), "bogus": 1})
    with pytest.raises(UserError, match="unknown setting 'bogus'"):
        run.SearchConfig.from_dict({**cfg.to_dict(), "ppo": {"bogus": 1}})


NO_TORCH = """
import sys
from wfrl.cli import main
try:
    code = main({argv!r})
except SystemExit as exc:
    code = exc.code
assert "torch" not in sys.modules, "torch was imported"
print("exit", code)
"""


@pytest.mark.parametrize("argv,code", [
    (["--help"], 0), (["train", "--help"], 0), (["exhaustive", "--help"], 0),
    (["eval", "--help"], 0), (["train", "--seed", "-1"], 2),
    (["train", "--workflow", "balanced", "--alignment-lambda", "inf"], 2),
    (["train", "--total-episodes", "x"], 2), (["eval", "--cage2"], 2),
    (["parity", "--episodes", "1"], 2), (["bench", "search"], 2),
])
def test_help_and_argument_errors_do_not_import_torch(argv, code):
    res = subprocess.run([sys.executable, "-c", NO_TORCH.format(argv=argv)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"exit {code}" in res.stdout
    if code == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("wfrl: error: "), res.stderr
