"""`python -m wfrl` as a user runs it: training records, evaluation, and bad input."""
import csv
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import run_wfrl

WF = "defender,enterprise,op_server,op_host,user"


def wfrl(*args, code=None, env=None):
    env = {**os.environ, **(env or {})}
    if code is None:
        return run_wfrl(*args, env=env)
    # run main() after `code` (used to hide an installed package)
    cmd = [sys.executable, "-c", f"{code}\nimport sys\nfrom wfrl.cli import main\n"
                                 f"sys.exit(main({list(map(str, args))!r}))"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def _digest(path: Path) -> dict:
    """Digests of a run's files (not of its lock file, which names the last process to lock)."""
    from wfrl.runlog import LOCK_FILE
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.iterdir()) if p.is_file() and p.name != LOCK_FILE}


def _assert_user_error(res, fragment):
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("wfrl: error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    res = wfrl("train", "--backend", "cyborg", "--collector", "sequential", "--workflow", WF,
               "--total-episodes", 20, "--episodes-per-update", 10, "--out", out)
    assert res.returncode == 0, res.stderr
    return out, res


@pytest.mark.slow
@pytest.mark.cyborg
def test_train_writes_sane_records(trained_run):
    import torch

    from wfrl.runlog import read_csv
    from wfrl.training.steps import LOG_COLUMNS
    out, res = trained_run
    assert "eps/s" in res.stderr and "compliance" in res.stderr
    cfg = json.loads((out / "experiment_config.json").read_text())
    assert cfg["workflow_order"] == WF and cfg["backend"] == "cyborg"
    assert cfg["total_episodes"] == 20 and cfg["ppo"]["lr"] == 0.002
    from wfrl.config.run import PPOConfig
    from wfrl.ppo.learner import update_step_name
    assert cfg["update_step"] == update_step_name(PPOConfig.from_dict(cfg["ppo"]))   # how it ran
    rows = read_csv(out / "training_log.csv")
    assert list(rows[0]) == LOG_COLUMNS
    assert [int(r["Update"]) for r in rows] == [1, 2]
    assert [int(r["Total_Episodes_Sampled"]) for r in rows] == [10, 20]
    for r in rows:
        assert r["Workflow_ID"] == "0" and r["Workflow_Order"] == WF
        # CAGE2 returns over 100 steps lie in (-1500, 0]; a random-ish policy is well below 0.
        assert -1500 < float(r["Env_Reward"]) < 0
        assert 0.0 <= float(r["Compliance"]) <= 1.0
        assert float(r["Avg_Fixes"]) >= 0
        assert float(r["Collection_Time"]) > 0 and float(r["Update_Time"]) > 0
        assert math.isclose(float(r["Total_Reward"]),
                            float(r["Env_Reward"]) + float(r["Alignment_Bonus"]), abs_tol=1e-3)
    ck = torch.load(out / "checkpoint.pt", weights_only=True)
    assert ck["workflow"] == WF and ck["episodes"] == 20 and ck["version"] == 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 20 and summary["stop_reason"] == "budget"


@pytest.mark.slow
@pytest.mark.cyborg
def test_eval_json(trained_run):
    out, _ = trained_run
    res = wfrl("eval", "--checkpoint", out / "checkpoint.pt", "--backend", "cyborg",
               "--red-agent", "B_lineAgent", "--episodes", 4, "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert {"mean", "se", "n", "compliance"} <= set(d)
    assert d["n"] == 4 and d["mean"] < 0 and d["se"] >= 0 and 0 <= d["compliance"] <= 1
    assert d["sampling"]["n"] == 4
    text = wfrl("eval", "--checkpoint", out / "checkpoint.pt", "--episodes", 2)
    assert text.returncode == 0 and "greedy" in text.stdout and "sampling" in text.stdout


@pytest.mark.cyborg
def test_existing_run_is_not_overwritten(trained_run):
    out, _ = trained_run
    before = _digest(out)
    res = wfrl("train", "--workflow", WF, "--total-episodes", 2, "--out", out)
    _assert_user_error(res, "already holds a run")
    assert _digest(out) == before


@pytest.mark.slow
@pytest.mark.cyborg
def test_training_stops_early_on_compliance(tmp_path):
    res = wfrl("train", "--workflow", WF, "--total-episodes", 50, "--episodes-per-update", 2,
               "--compliance-threshold", 0.0, "--min-episodes", 4, "--out", tmp_path)
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stop_reason"] == "compliance" and summary["episodes"] == 4


@pytest.mark.parametrize("args,fragment", [
    (["train", "--workflow", "defender,enterprise,op_server,op_host,printer"], "unknown unit type"),
    (["train", "--workflow", "defender,defender,op_server,op_host,user"], "more than once"),
    (["train", "--workflow", "defender,enterprise"], "all 5 unit types"),
    (["train", "--red-agent", "EvilAgent"], "unknown red agent"),
    (["train", "--backend", "gpu"], "unknown backend"),
    (["train", "--collector", "magic"], "unknown collector"),
    (["train", "--collector", "ray", "--ray-address", "garbage"], "--ray-address: expected HOST:PORT"),
    (["train", "--collector", "ray", "--ray-address", "10.0.0.5:99999"], "must be a number in 1..65535"),
    (["train", "--n-workers", "2", "--ray-address", "ray://10.0.0.5:10001"], "Ray Client"),
    (["train", "--total-episodes", "0"], "--total-episodes must be positive"),
    (["train", "--episodes-per-update", "-3"], "--episodes-per-update must be positive"),
    (["train", "--total-episodes", "ten"], "expected a whole number"),
    (["train", "--compliance-threshold", "1.5"], "--compliance-threshold must lie in [0, 1]"),
    (["train", "--compliance-threshold", "-0.1"], "--compliance-threshold must lie in [0, 1]"),
    (["train", "--belief-input", "100000000"], "--belief-input must lie in 0..100000"),
    (["train", "--belief-input", "-1"], "--belief-input must lie in 0..100000"),
    (["bench", "train", "--belief-input", "100001"], "--belief-input must lie in 0..100000"),
    (["train", "--no-such-flag"], "unrecognized arguments"),
    (["eval"], "--checkpoint"),
    (["parity", "--blue", "nap"], "unknown blue policy"),
    (["parity", "--blue", "pretrained:nope"], "no pretrained policy 'nope'"),
    (["bench", "collectors", "--n-workers", "0"], "--n-workers must be positive"),
    (["bench", "collectors", "--backend", "gpu"], "unknown backend"),
    (["bench"], "required"),
    (["train", "--collector", "async", "--n-workers", "0"], "--n-workers must be positive"),
    (["parity", "--red-agent", "EvilAgent"], "unknown red agent"),
    (["parity", "--episodes", "1"], "at least 2"),
    (["eval", "--checkpoint", "/nonexistent/ck.pt"], "does not exist"),
    (["train", "--workflow", WF, "--init-from", "/nonexistent/ck.pt"], "does not exist"),
    (["train", "--workflow", WF, "--init-from", "pretrained:critical_first", "--no-memory"],
     "its policy is hidden 64, memory on, mask on, this run trains hidden 64, memory off"),
    (["train", "--backend", "cyborg:leaderbord"], "unknown backend"),
    (["eval", "--checkpoint", "x.pt", "--episodes", "0"], "--episodes must be positive"),
    ([], "required"),
])
def test_bad_input_is_one_line_exit_2(args, fragment, tmp_path):
    res = wfrl(*args, "--out", tmp_path / "o") if args[:1] == ["train"] else wfrl(*args)
    _assert_user_error(res, fragment)
    assert not (tmp_path / "o" / "experiment_config.json").exists()


@pytest.mark.slow
def test_unwritable_output_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("keep me")
    res = wfrl("train", "--out", blocker / "sub")
    _assert_user_error(res, "cannot create output directory")
    assert blocker.read_text() == "keep me"
    res = wfrl("train", "--out", blocker)
    _assert_user_error(res, "not a directory")


@pytest.mark.slow
def test_corrupt_checkpoint(tmp_path):
    bad = tmp_path / "ck.pt"
    bad.write_bytes(b"\x80\x02 definitely not a checkpoint")
    _assert_user_error(wfrl("eval", "--checkpoint", bad), "cannot read checkpoint")
    assert bad.read_bytes() == b"\x80\x02 definitely not a checkpoint"
    import torch
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    _assert_user_error(wfrl("eval", "--checkpoint", other), "not a wfrl checkpoint")


@pytest.mark.cyborg
def test_truncated_checkpoint(trained_run, tmp_path):
    data = (trained_run[0] / "checkpoint.pt").read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[: len(data) // 2])
    _assert_user_error(wfrl("eval", "--checkpoint", cut), "cannot read checkpoint")


def test_missing_cyborg_extra_is_a_clear_error(tmp_path):
    hide = "import sys\nsys.modules['csle_cyborg'] = None"
    res = wfrl("train", "--backend", "cyborg", "--out", tmp_path / "o", code=hide)
    _assert_user_error(res, "[cyborg] extra")
    assert not (tmp_path / "o" / "experiment_config.json").exists()


@pytest.mark.slow
@pytest.mark.cyborg
def test_parity_json():
    res = wfrl("parity", "--red-agent", "B_lineAgent", "--blue", "sleep", "--episodes", 6,
               "--sim-episodes", 500, "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["sim"]["n"] == 500 and d["cyborg"]["n"] == 6
    assert abs(d["diff"] - (d["sim"]["mean"] - d["cyborg"]["mean"])) < 1e-9
    assert -1200 < d["cyborg"]["mean"] < -1000 and isinstance(d["equivalent"], bool)
    text = wfrl("parity", "--blue", "react-restore", "--episodes", 2, "--sim-episodes", 100)
    assert text.returncode == 0 and "TOST" in text.stdout


@pytest.mark.slow
def test_train_searches_on_the_simulator_by_default(tmp_path):
    res = wfrl("train", "--total-episodes", 60, "--pretrain-episodes", 20,
               "--episodes-per-update", 20, "--out", tmp_path)
    assert res.returncode == 0, res.stderr
    cfg = json.loads((tmp_path / "experiment_config.json").read_text())
    assert cfg["backend"] == "sim" and cfg["mode"] == "search"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes_used"] == 60 and summary["visits"] == 1


def test_search_defaults_follow_the_backend():
    from wfrl.config.run import SearchConfig
    from wfrl.search.bases import search_defaults
    base = SearchConfig()

    def fill(backend, given):
        return search_defaults(backend, given, SearchConfig(backend=backend))[0]
    assert fill("sim", {}) == fill("cyborg", {}) == {"base": "pretrain"}
    lb = fill("sim:leaderboard", {})
    assert lb["pretrain_episodes"] == 2 * base.pretrain_episodes
    assert lb["total_episodes"] - lb["pretrain_episodes"] == \
        base.total_episodes - base.pretrain_episodes
    assert fill("cyborg:leaderboard", {"pretrain_episodes": 5}) == {"base": "pretrain"}
    assert fill("sim:leaderboard", {"total_episodes": 5}) == {
        "base": "pretrain", "pretrain_episodes": lb["pretrain_episodes"]}


@pytest.mark.slow
def test_train_on_the_leaderboard_code_records_the_longer_base(tmp_path):
    res = wfrl("train", "--backend", "sim:leaderboard", "--base", "pretrain",
               "--total-episodes", 40, "--episodes-per-update", 20, "--out", tmp_path)
    assert res.returncode == 0, res.stderr
    cfg = json.loads((tmp_path / "experiment_config.json").read_text())
    assert cfg["pretrain_episodes"] == 120_000 and cfg["total_episodes"] == 40
    assert json.loads((tmp_path / "summary.json").read_text())["episodes_used"] == 40


@pytest.mark.slow
def test_bench_collectors_json():
    res = wfrl("bench", "collectors", "--backend", "sim", "--n-workers", 2, "--episodes", 64,
               "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["collector"] for r in rows] == ["bare-env", "sequential", "sync", "async", "ray"]
    for r in rows:
        assert {"collector", "episodes_per_s", "steps_per_s", "efficiency"} <= set(r)
        assert r["episodes_per_s"] > 0 and r["steps_per_s"] == pytest.approx(100 * r["episodes_per_s"])


def test_help_works():
    res = wfrl("train", "--help")
    assert res.returncode == 0 and "--workflow" in res.stdout and "--alignment-lambda" in res.stdout


@pytest.mark.parametrize("args,code,teardown", [
    (["train", "--workflow", "bogus"], 2, False),       # the command returns: quick exit
    (["eval", "--help"], 0, True),                       # SystemExit: the ordinary exit
])
def test_python_m_wfrl_leaves_after_the_exit_handlers(tmp_path, args, code, teardown):
    # After a command returns, `python -m wfrl` stops its threads (a thread pool's too), runs every
    # exit handler and then leaves with its exit code, without Python's module teardown (1.0 s a run); an object that would speak only
    # at teardown stays silent then, and speaks where the command ends by SystemExit.
    marker = tmp_path / "teardown"
    (tmp_path / "latemod.py").write_text(     # a module whose object speaks when torn down
        "class Late:\n"
        "    def __del__(self, open=open):\n"
        f"        open({str(marker)!r}, 'w').write('ran')\n"
        "late = Late()\n")
    script = (
        "import atexit, runpy, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import latemod\n"
        "from concurrent.futures import ThreadPoolExecutor\n"   # a pool alive at the exit
        "pool = ThreadPoolExecutor(1); pool.submit(int).result()\n"
        f"atexit.register(lambda: open({str(tmp_path / 'handler')!r}, 'w').write('ran'))\n"
        f"sys.argv = ['wfrl', *{args!r}, '--out', {str(tmp_path / 'run')!r}]\n"
        "runpy.run_module('wfrl', run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == code, out.stderr
    assert (tmp_path / "handler").exists()               # exit handlers ran either way
    assert marker.exists() == teardown
    if code == 2:
        assert out.stderr.startswith("wfrl: error: unknown unit type 'bogus'")


@pytest.mark.parametrize("environ,want", [
    ({}, "10000"),
    ({"GOMP_SPINCOUNT": "5"}, "5"),                        # the user's own choice stays
    ({"OMP_WAIT_POLICY": "ACTIVE"}, None),                 # so does a policy they chose
])
def test_python_m_wfrl_lets_idle_openmp_threads_sleep_soon(environ, want):
    from wfrl.api import quiet_openmp
    env = dict(environ)
    quiet_openmp(env)
    assert env.get("GOMP_SPINCOUNT") == want


@pytest.mark.parametrize("environ,want", [({}, "1"), ({"OMP_NUM_THREADS": "2"}, "2")])
def test_python_m_wfrl_runs_one_openmp_thread_unless_told(environ, want):
    from wfrl.api import one_thread_by_default
    env = dict(environ)
    one_thread_by_default(env)
    assert env["OMP_NUM_THREADS"] == want


def test_python_m_wfrl_sets_one_thread_before_numpy_and_torch_load(tmp_path):
    """OpenBLAS and torch size their pools when they load: the variable must be in place by then.
    An import spy records what it was when each was first imported during a short run."""
    script = ("import importlib.abc, json, os, runpy, sys, atexit\n"
              "seen = {}\n"
              "class Spy(importlib.abc.MetaPathFinder):\n"
              "    def find_spec(self, name, path, target=None):\n"
              "        if name in ('numpy', 'torch') and name not in seen:\n"
              "            seen[name] = os.environ.get('OMP_NUM_THREADS')\n"
              "sys.meta_path.insert(0, Spy())\n"
              "atexit.register(lambda: print('SEEN', json.dumps(seen)))\n"
              "sys.argv = ['wfrl', 'train', '--workflow', 'critical_first', '--total-episodes', "
              "'20', '--episodes-per-update', '20', '--hidden', '16', '--out', "
              f"{str(tmp_path / 'run')!r}]\n"
              "runpy.run_module('wfrl', run_name='__main__')\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.split("SEEN ", 1)[1])
    assert seen == {"numpy": "1", "torch": "1"}


def test_python_m_wfrl_sets_the_policy_before_torch_loads_openmp(tmp_path):
    # what the process's OpenMP runtime saw: libgomp prints its settings when it starts with
    # OMP_DISPLAY_ENV=VERBOSE (its default spin count is 300,000). torch is first imported by
    # an exit handler, after `python -m wfrl` ran (a command that fails before needing torch).
    script = ("import atexit, runpy, sys\n"
              "def late():\n"
              "    import torch\n"
              "    torch.set_num_threads(2)\n"
              "    torch.ones(1 << 20).add_(1)\n"     # a parallel region: the runtime is up
              "atexit.register(late)\n"
              "sys.argv = ['wfrl', 'train', '--workflow', 'bogus', '--out', "
              f"{str(tmp_path / 'run')!r}]\n"
              "runpy.run_module('wfrl', run_name='__main__')\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 2, out.stderr
    assert "GOMP_SPINCOUNT = '10000'" in out.stderr + out.stdout
    assert "OMP_NUM_THREADS = '1'" in out.stderr + out.stdout   # the pools' size, fixed


def test_init_from_starts_from_the_checkpoints_weights(tmp_path):
    """--init-from: the run's first batch is played by the named policy (the shipped one defends
    at about -13 per episode; a fresh network at about -400), its weights moved only by the
    updates since, and the optimiser fresh."""
    import torch

    from wfrl.runlog import load_checkpoint
    args = ("train", "--workflow", "critical_first", "--red-agent", "mixed", "--total-episodes", 20,
            "--episodes-per-update", 10, "--collector", "sequential", "--seed", 3)
    rows = {}
    for name, extra in (("init", ("--init-from", "pretrained:critical_first")), ("fresh", ())):
        res = wfrl(*args, *extra, "--out", tmp_path / name)
        assert res.returncode == 0, res.stderr
        with open(tmp_path / name / "training_log.csv", newline="") as f:
            rows[name] = list(csv.DictReader(f))
    assert float(rows["init"][0]["Env_Reward"]) > -40 > float(rows["fresh"][0]["Env_Reward"])
    shipped = load_checkpoint("pretrained:critical_first")["model"]
    mine = torch.load(tmp_path / "init" / "checkpoint.pt", weights_only=True)["model"]
    drift = max(float((mine[k] - shipped[k]).abs().max()) for k in shipped)
    assert 0 < drift < 0.1   # two updates of lr 0.002 from the shipped weights


def test_search_base_starts_from_a_matching_conditioned_policy_only():
    from wfrl.config.run import PPOConfig, SearchConfig
    from wfrl.runlog import load_checkpoint
    from wfrl.search.bases import VISIT_BUDGET, base_mismatch, search_defaults
    recipe = PPOConfig(memory=True, mask=True)
    shipped = load_checkpoint("pretrained:any_workflow")
    assert base_mismatch(SearchConfig(ppo=recipe), shipped) is None
    for cfg, why in [(SearchConfig(ppo=recipe, alignment_lambda=10.0), "λ = 30"),
                     (SearchConfig(ppo=recipe, count_foothold=True), "foothold"),
                     (SearchConfig(ppo=PPOConfig(memory=True, mask=True, hidden=128)), "hidden"),
                     (SearchConfig(ppo=PPOConfig()), "this search trains"),
                     (SearchConfig(ppo=recipe, backend="sim:leaderboard"), "code")]:
        assert why in base_mismatch(cfg, shipped), cfg
    assert "one workflow" in base_mismatch(SearchConfig(ppo=recipe),
                                           load_checkpoint("pretrained:critical_first"))
    # auto: the shipped policy of the backend's code when the settings match, all visits
    fill, note = search_defaults("sim", {}, SearchConfig(ppo=recipe, base="auto"))
    assert fill == {"base": "pretrained:any_workflow", "pretrain_episodes": 0,
                    "total_episodes": VISIT_BUDGET} and "no pretraining" in note
    fill, _ = search_defaults("cyborg:leaderboard", {"total_episodes": 9},
                              SearchConfig(ppo=recipe, base="auto", backend="cyborg:leaderboard"))
    assert fill == {"base": "pretrained:any_workflow_leaderboard", "pretrain_episodes": 0}
    # settings that do not match never start from it: pretraining, and the run says why
    for given, cfg in [({}, SearchConfig(ppo=recipe, base="auto", alignment_lambda=10.0)),
                       ({"pretrain_episodes": 5}, SearchConfig(ppo=recipe, base="auto")),
                       ({}, SearchConfig(ppo=recipe, base="auto", inherit="scratch"))]:
        fill, note = search_defaults("sim", given, cfg)
        assert fill.get("base") == "pretrain" and "pretraining a base here" in note, (given, cfg)
    # a named base that does not fit is refused in one line
    from wfrl.errors import UserError
    with pytest.raises(UserError, match="cannot start this search: it was trained with λ = 30"):
        search_defaults("sim", {}, SearchConfig(ppo=recipe, base="pretrained:any_workflow",
                                                alignment_lambda=5.0))


def test_search_from_the_shipped_base_pretrains_nothing(tmp_path):
    import torch
    res = wfrl("train", "--base", "auto", "--total-episodes", 200, "--episodes-per-update", 100,
               "--max-evaluations", 1, "--gp-eval-episodes", 5, "--out", tmp_path)
    assert res.returncode == 0, res.stderr
    assert "[base] the visits start from pretrained:any_workflow" in res.stderr
    assert "pretraining |" not in res.stderr
    cfg = json.loads((tmp_path / "experiment_config.json").read_text())
    assert cfg["base"] == "pretrained:any_workflow" and cfg["pretrain_episodes"] == 0
    from wfrl.runlog import load_checkpoint
    base = load_checkpoint(tmp_path / "checkpoints" / "base.pt")["model"]
    shipped = load_checkpoint("pretrained:any_workflow")["model"]
    assert all(torch.equal(base[k], shipped[k]) for k in shipped)
    res = wfrl("train", "--base", "auto", "--alignment-lambda", 10, "--total-episodes", 40,
               "--pretrain-episodes", 20, "--episodes-per-update", 20, "--out", tmp_path / "b",
               "--max-evaluations", 1)
    assert res.returncode == 0 and "pretraining a base here" in res.stderr, res.stderr
