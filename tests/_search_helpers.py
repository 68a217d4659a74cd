"""What the workflow-search test modules share: a small search configuration, one reference run
(made once per session, whichever module asks first), the stored configuration of a run to
resume, and wfrl's main() called in this process."""
import contextlib
import io

import pytest

from wfrl.config.run import PPOConfig, SearchConfig
from wfrl.search.loop import search
from wfrl.training.steps import TIMING_COLUMNS

# The recipe's learner (what `wfrl train` uses by default), small and quick.
PPO = PPOConfig(hidden=32, epochs=2, memory=True, mask=True, clip_per_net=True)


def search_cfg(out, **kw):
    base = dict(total_episodes=1000, max_episodes=300, min_episodes=100, episodes_per_update=50,
                pretrain_episodes=100, compliance_eval_episodes=20,
                compliance_threshold=0.25, patience=4, collector="sequential", seed=3,
                inherit="closest", out=str(out), ppo=PPO,
                # the earlier visit measurement, against one red: what these tests were written
                # for (the greedy both-red measurement has tests of its own)
                red_agent="B_lineAgent", visit_eval="training", gp_eval_episodes=0)
    base.update(kw)
    return SearchConfig(**base)


def quiet(_line):
    pass


def comparable(rows):
    """Log rows without their wall-clock columns."""
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def assert_same_logs(run, ref) -> None:
    """Two search directories hold the same training log (but for wall-clock columns) and the
    same visits."""
    from wfrl.runlog import read_csv
    assert comparable(read_csv(run / "training_log.csv")) == \
        comparable(read_csv(ref / "training_log.csv"))
    assert read_csv(run / "gp_sampling_log.csv") == read_csv(ref / "gp_sampling_log.csv")


_reference = {}


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory):
    """A 730-episode search of search_cfg: (its directory, its summary). Modules importing this
    fixture get one fixture definition each; the run itself is made once."""
    if "run" not in _reference:
        out = tmp_path_factory.mktemp("search") / "run"
        summary = search(search_cfg(out, total_episodes=730), progress=quiet)
        _reference["run"] = (out, summary)
    return _reference["run"]


def resume_cfg(out):
    from wfrl.search.state import resume_config
    return resume_config(str(out))


class CliResult:
    def __init__(self, returncode, stderr):
        self.returncode, self.stderr = returncode, stderr


def run_cli(*args):
    """wfrl's main() in this process (a subprocess per case costs seconds of imports)."""
    from wfrl.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(list(args))
    return CliResult(code, err.getvalue())
