"""The maintained tools in scripts/: each answers --help and does its job on a small real input.
The one-off analyses live in experiments/, each listed in its index, and nothing reaches a
neighbouring script through sys.path."""
import csv
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

from wfrl.evaluation.attribution import HOST_NAMES

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
EXPERIMENTS = ROOT / "experiments"
SHIPPED = ROOT / "docs" / "results" / "shipped" / "2026-11-27_critical_first"
RUN = SHIPPED / "training_run"

# every file in scripts/ and the test that runs it (setup.sh: the CI's first command, .ci/run)
TOOLS = {
    "cage2_markdown.py": "test_cage2_markdown_tables_a_recorded_evaluation",
    "compare_cage2.py": "test_compare_cage2_sets_recorded_evaluations_side_by_side",
    "learning_curves.py": "test_learning_curves_plots_recorded_runs",
    "record_parity.py": "test_record_parity_replays_recorded_episodes",
    "relative_paths.py": "test_relative_paths_rewrites_a_runs_absolute_paths",
    "results_table.py": "test_results_table_reads_recorded_runs",
    "select_checkpoint.py": "test_select_checkpoint_ranks_and_screens",
    "ship_pretrained.py": "test_ship_pretrained_writes_a_loadable_small_policy",
    "stability.py": "test_stability_evaluates_each_runs_best",
    "suite_processes.py": "test_suite_processes_logs_every_process_a_test_starts",
    "setup.sh": None,
}


def _run(script, *args, cwd=ROOT, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(SCRIPTS / script), *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_scripts_holds_only_the_tested_tools():
    present = {p.name for p in SCRIPTS.iterdir() if p.is_file()}
    assert present == set(TOOLS), f"untested or missing tools: {sorted(present ^ set(TOOLS))}"
    for test in filter(None, TOOLS.values()):
        assert test in globals(), test


@pytest.mark.parametrize("script", sorted(s for s in TOOLS if s.endswith(".py")))
def test_tool_answers_help(script):
    out = _run(script, "--help", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage:") and "-h, --help" in out.stdout


def test_no_sys_path_tricks_between_scripts():
    for p in [*SCRIPTS.glob("*.py"), *EXPERIMENTS.glob("*.py")]:
        text = p.read_text()
        assert "sys.path" not in text, f"{p.relative_to(ROOT)} edits sys.path"
        for m in re.finditer(r"^\s*(?:from|import) (\w+)", text, re.M):
            assert not (SCRIPTS / f"{m.group(1)}.py").exists(), \
                f"{p.relative_to(ROOT)} imports the script {m.group(1)}"


def test_every_experiment_is_indexed_and_compiles():
    index = (EXPERIMENTS / "README.md").read_text()
    for p in sorted(EXPERIMENTS.iterdir()):
        if p.suffix not in (".py", ".sh") or p.name == "__init__.py":
            continue
        assert f"`{p.name}`" in index, f"experiments/{p.name} has no line in experiments/README.md"
        if p.suffix == ".py":
            compile(p.read_text(), str(p), "exec")


def test_compare_cage2_sets_recorded_evaluations_side_by_side(tmp_path):
    old = SHIPPED.parent / "2026-11-27_critical_first_joint_clip" / "sim_cage2.json"
    out = _run("compare_cage2.py", f"now={SHIPPED / 'sim_cage2.json'}", f"before={old}")
    assert out.returncode == 0, out.stderr
    # -13.3342 - (-13.3232) = -0.011; se of the difference √(0.1062² + 0.099²) = 0.145
    assert "| B_lineAgent | 100 | -13.32 ± 0.11 (0.999) | -13.33 ± 0.10 (0.999) | -0.01 ± 0.15 |" \
        in out.stdout
    # with --attribute's split: the cost table per host and cause
    res = json.loads((SHIPPED / "sim_cage2.json").read_text())
    for r in res["settings"]:
        r["cost"] = {"by_host": {h: {"total": {"mean": -1.0 if h == "User2" else 0.0, "se": 0.0}}
                                 for h in HOST_NAMES},
                     "by_cause": {c: {"mean": -1.0 if c == "restore" else 0.0, "se": 0.0}
                                  for c in ("privileged", "restore", "impact", "other")},
                     "total": {"mean": -1.0, "se": 0.0}}
    split = tmp_path / "split.json"
    split.write_text(json.dumps(res))
    out = _run("compare_cage2.py", f"a={split}", f"b={split}")
    assert out.returncode == 0, out.stderr
    assert "Where the cost comes from, B_lineAgent-100" in out.stdout
    assert "| User2 | -1.00 ± 0.00 | -1.00 ± 0.00 |" in out.stdout
    assert "| User3 |" not in out.stdout and "other" not in out.stdout
    leaderboard = ROOT / "docs" / "results" / "leaderboard" / "2026-11-28_leaderboard_code"
    bad = _run("compare_cage2.py", f"a={split}", f"b={leaderboard / 'sim_cage2.json'}")
    assert bad.returncode != 0 and "has backend 'sim:leaderboard'" in bad.stderr
    bad = _run("compare_cage2.py", str(split))
    assert bad.returncode != 0 and "is not LABEL=FILE" in bad.stderr


def test_cage2_markdown_tables_a_recorded_evaluation():
    out = _run("cage2_markdown.py", SHIPPED / "sim_cage2.json", SHIPPED / "cyborg_cage2.json")
    assert out.returncode == 0, out.stderr
    assert "| B_lineAgent | 100 | -13.22 ± 3.30 (0.10) | 0.999 | -13.32 ± 3.36 |" in out.stdout
    assert "CybORG -52.63 ± 0.37 (95 %)" in out.stdout
    assert out.stdout.count("— holds") == 3
    bad = _run("cage2_markdown.py", SHIPPED / "no_such.json", SHIPPED / "cyborg_cage2.json")
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1


def test_results_table_reads_recorded_runs():
    runs = sorted((ROOT / "docs/results/recipe/2026-11-27_overlap").glob("l95_*"))
    out = _run("results_table.py", *runs, "--at", 40000)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| l95_")]
    assert len(rows) == len(runs) == 9
    for run, row in zip(runs, rows):
        at40 = next(r for r in csv.DictReader(open(run / "eval_log.csv")) if r["Episodes"] == "40000")
        assert f"{float(at40['Reward']):.2f} ± {float(at40['Reward_SE']):.2f}" in row, row


def test_learning_curves_plots_recorded_runs(tmp_path):
    res = ROOT / "docs/results/recipe"
    png = tmp_path / "curves.png"
    out = _run("learning_curves.py", "--out", png, "--cyborg-points", 0,
               f"{res}/2026-11-26_stability/seed1:recipe", f"{res}/2026-11-26_ablation/original:original")
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def _run_dir(tmp_path):
    """A run directory as training leaves it: eval_log.csv and one evaluated policy."""
    run = tmp_path / "run"
    (run / "evals").mkdir(parents=True)
    shutil.copy(RUN / "eval_log.csv", run / "eval_log.csv")
    shutil.copy(RUN / "ep_00265000.pt", run / "evals" / "ep_00265000.pt")
    shutil.copy(RUN / "ep_00265000.pt", run / "best.pt")
    return run


def test_select_checkpoint_ranks_and_screens(tmp_path):
    run = _run_dir(tmp_path)
    out = _run("select_checkpoint.py", run, "--top", 3, "--episodes", 20, "--screen", 1000,
               "--json", tmp_path / "sel.json")
    assert out.returncode == 0, out.stderr
    sel = json.loads((tmp_path / "sel.json").read_text())
    (row,) = sel["rows"]   # of the 3 best evaluations only ep_00265000.pt is kept here
    assert row["episodes"] == 265000 and row["checkpoint"].endswith("ep_00265000.pt")
    assert set(row["means"]) == {f"{r}-{n}" for r in ("B_lineAgent", "RedMeanderAgent")
                                 for n in (30, 50, 100)}
    assert abs(row["total"] - sum(row["means"].values())) < 0.01
    assert sel["screen"] == 1000 and set(row["catastrophes"]) == {"B_lineAgent-50", "RedMeanderAgent-50"}


def test_stability_evaluates_each_runs_best(tmp_path):
    run = _run_dir(tmp_path)
    out = _run("stability.py", run, run, "--episodes", 30, "--json", tmp_path / "st.json")
    assert out.returncode == 0, out.stderr
    st = json.loads((tmp_path / "st.json").read_text())
    assert len(st["runs"]) == 2 and st["runs"][0]["mean"] == st["runs"][1]["mean"]
    assert st["sd_across_runs"] == 0 and -40 < st["mean"] < -5


def test_suite_processes_logs_every_process_a_test_starts(tmp_path):
    log = tmp_path / "p.tsv"
    target = "tests/test_config.py::test_help_and_argument_errors_do_not_import_torch[argv4-2]"
    out = _run("suite_processes.py", "--log", log, "--", "-q", "-p", "no:cacheprovider", target)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = log.read_text().splitlines()
    started = [ln for ln in lines if ln.split("\t")[2].startswith(target + " (call) | ")]
    assert len(started) == 1 and started[0].split("\t")[1] == "0"      # it imported no torch
    assert len(lines) == 2                        # and the pytest process itself
    assert "processes the tests started: 1," in out.stdout
    again = _run("suite_processes.py", "--log", log, "--summary-only")
    assert again.returncode == 0 and again.stdout.strip() in out.stdout
    missing = _run("suite_processes.py", "--log", tmp_path / "none.tsv", "--summary-only")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_ship_pretrained_writes_a_loadable_small_policy(tmp_path):
    out = _run("ship_pretrained.py", RUN / "ep_00265000.pt", "probe", "--command", "wfrl train x",
               "--wall-time", "1 s", "--out-dir", tmp_path)
    assert out.returncode == 0, out.stderr
    ck = torch.load(tmp_path / "probe.pt", weights_only=True)
    src = torch.load(RUN / "ep_00265000.pt", weights_only=True)
    assert ck["provenance"] == {"command": "wfrl train x", "wall_time": "1 s"}
    assert "optimizer" not in ck and ck["workflow"] == src["workflow"]
    for k, v in src["model"].items():
        assert torch.equal(ck["model"][k], v), k


@pytest.mark.slow
def test_record_parity_replays_recorded_episodes():
    out = _run("record_parity.py", "--check", 0.0001, "--workers", 1, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.search(r"(\d+)/(\d+) replayed episodes match the record", out.stdout)
    assert m and m.group(1) == m.group(2) and int(m.group(2)) > 0, out.stdout


def test_relative_paths_rewrites_a_runs_absolute_paths(tmp_path):
    rec = tmp_path / "record"
    (rec / "seed0").mkdir(parents=True)
    work, tmp = "/" + "work", "/" + "tmp"      # (spelled apart: this file is checked for them)
    (rec / "seed0" / "experiment_config.json").write_text(json.dumps(
        {"out": f"{work}/runs/feas/seed0", "ppo": {"lr": 0.002}, "seed": 0}, indent=2) + "\n")
    (rec / "cyborg_cage2.json").write_text(json.dumps(
        {"settings": [{"checkpoint": f"{tmp}/feas/runs/ship/evals/ep_1.pt", "mean": -13.2}]}))
    (rec / "seed0" / "closing.txt").write_text(f"search done\nrecords in {tmp}/x/seed0\n")
    check = _run("relative_paths.py", "--check", rec)
    assert check.returncode == 1 and len(check.stdout.splitlines()) == 3, check.stdout
    out = _run("relative_paths.py", rec)
    assert out.returncode == 0 and "3 file(s) rewritten" in out.stdout, out.stdout + out.stderr
    cfg_text = (rec / "seed0" / "experiment_config.json").read_text()
    assert json.loads(cfg_text) == {"out": "runs/feas/seed0", "ppo": {"lr": 0.002}, "seed": 0}
    assert cfg_text.startswith('{\n  "out"')                      # its layout kept
    cage = (rec / "cyborg_cage2.json").read_text()
    assert "\n" not in cage and json.loads(cage)["settings"][0]["checkpoint"] == \
        "runs/ship/evals/ep_1.pt"
    assert (rec / "seed0" / "closing.txt").read_text() == "search done\nrecords in runs/seed0\n"
    assert _run("relative_paths.py", "--check", rec).returncode == 0
    assert _run("relative_paths.py", tmp_path / "missing").returncode == 2


def _wfrl_imports(path: pathlib.Path):
    """(line, module, name) of every `from wfrl… import name` in a source file, at any depth."""
    import ast
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "wfrl" or node.module.startswith("wfrl.")):
            for alias in node.names:
                yield node.lineno, node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("wfrl."):
                    yield node.lineno, alias.name, None


@pytest.mark.parametrize("folder", ["experiments", "scripts", "bench", "examples"])
def test_the_wfrl_names_every_script_imports_exist(folder):
    """Scripts run only for their records are compiled, never run, in the suite: a rename in wfrl
    would break them silently. Every wfrl module and name they import (at any depth) resolves."""
    import importlib
    missing = []
    for p in sorted((ROOT / folder).rglob("*.py")):
        for line, module, name in _wfrl_imports(p):
            try:
                mod = importlib.import_module(module)
            except ImportError as exc:
                missing.append(f"{p.relative_to(ROOT)}:{line}: {module} ({exc})")
                continue
            if name is not None and not hasattr(mod, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{p.relative_to(ROOT)}:{line}: {module}.{name}")
    assert not missing, "imports that no longer resolve:\n" + "\n".join(missing)


def test_experiments_is_a_folder_of_scripts_whose_sibling_imports_resolve():
    """experiments/ is no package (it is run as `python experiments/NAME.py`): a script that
    uses another's helpers imports it by file name, and each such name is defined there."""
    import ast
    assert not (EXPERIMENTS / "__init__.py").exists()
    missing, seen = [], 0
    for p in sorted(EXPERIMENTS.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p))):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            assert not node.module.startswith("experiments"), \
                f"{p.name}:{node.lineno} imports experiments as a package"
            sibling = EXPERIMENTS / f"{node.module}.py"
            if not sibling.exists():
                continue
            seen += 1
            tree = ast.parse(sibling.read_text())
            defined = {n.name for n in tree.body
                       if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            defined |= {t.id for n in tree.body if isinstance(n, ast.Assign)
                        for t in n.targets if isinstance(t, ast.Name)}
            defined |= {(a.asname or a.name).split(".")[0] for n in tree.body
                        if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
            missing += [f"{p.name}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                        if a.name not in defined]
    assert seen >= 4 and not missing, missing
