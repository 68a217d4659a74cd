"""The benchmark regression check (bench/compare.py against bench/baseline.json, reading the
figures the bench tests store in pytest-benchmark's JSON): it passes on the committed baseline's
own figures, fails, naming the figure, on a planted regression, both from a results file and from
a real `pytest bench/... --benchmark-json` run of a slowed-down vector env, and passes on the code
as it is."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _compare_module():
    spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "bench" / "compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


compare = _compare_module()
BASELINE = compare.load_baseline()


def _cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "compare.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_the_baseline_holds_every_figure_with_a_reasoned_tolerance():
    assert set(BASELINE) == set(compare.FIGURE_TESTS)   # each figure has the bench test measuring it
    for name, test in compare.FIGURE_TESTS.items():
        path, fn = test.split("::")
        source = (ROOT / path).read_text()
        assert f"def {fn}(" in source and f'"{name}"' in source, (name, test)   # stored there
    assert {n for n, f in BASELINE.items() if f.get("fast")}   # a fast subset exists
    for name, f in BASELINE.items():
        assert f["value"] > 0 and 0.05 <= f["tolerance"] <= 0.5, name
        assert len(f["why"]) > 40, name     # the reason for the tolerance, in words


def test_baseline_values_pass_and_a_planted_regression_fails():
    values = {k: f["value"] for k, f in BASELINE.items()}
    assert compare.compare(BASELINE, values)[1] == []
    for name, f in BASELINE.items():
        just_inside = {**values, name: f["value"] * (1 - f["tolerance"]) * 1.001}
        assert compare.compare(BASELINE, just_inside)[1] == []
        planted = {**values, name: f["value"] * (1 - f["tolerance"]) * 0.98}
        regressions = compare.compare(BASELINE, planted)[1]
        assert len(regressions) == 1 and regressions[0].startswith(f"regression: {name} = ")


def test_the_command_exits_1_on_a_regression_0_without_and_2_on_bad_input(tmp_path):
    values = {k: f["value"] for k, f in BASELINE.items()}
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(values))
    name = sorted(BASELINE)[0]
    bad.write_text(json.dumps({**values, name: values[name] * 0.5}))
    res = _cli("--results", good)
    assert res.returncode == 0 and f"no regression ({len(values)} figures)" in res.stdout
    res = _cli("--results", bad)
    assert res.returncode == 1
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("regression: ")] == [
        ln for ln in res.stdout.splitlines() if ln.startswith(f"regression: {name} = ")]
    (tmp_path / "junk.json").write_text("[1, 2")
    res = _cli("--results", tmp_path / "junk.json")
    assert res.returncode == 2 and res.stderr.startswith("compare: error: bad results ")
    res = _cli("--benchmark-json", tmp_path / "junk.json")
    assert res.returncode == 2 and res.stderr.startswith("compare: error: bad pytest-benchmark")
    (tmp_path / "empty.json").write_text('{"benchmarks": []}')
    res = _cli("--benchmark-json", tmp_path / "empty.json", "--allow-missing")
    assert res.returncode == 2 and "holds none of the figures" in res.stderr


def _bench_run(tmp_path, name, plant=None):
    """`pytest bench/test_bench_vec.py::test_vec_targets --benchmark-json F` (with the planted
    slowdown WFRL_BENCH_PLANT=slow_vec, if asked); returns F."""
    out = tmp_path / f"{name}.json"
    # a pytest of its own: without this test process's PYTEST_* variables (with pytest-xdist's
    # PYTEST_XDIST_WORKER set, pytest-benchmark turns itself off and writes no JSON)
    env = {k: v for k, v in os.environ.items()
           if k != "WFRL_BENCH_PLANT" and not k.startswith("PYTEST_")}
    if plant:
        env["WFRL_BENCH_PLANT"] = plant
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "bench/test_bench_vec.py::test_vec_targets", "--benchmark-json",
                          str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert out.exists(), res.stdout[-3000:] + res.stderr[-2000:]
    return out


@pytest.mark.cyborg
def test_a_bench_run_fails_on_a_planted_slowdown_and_passes_on_the_code(tmp_path):
    name = "vec_env_vs_step_batch"
    slowed = _bench_run(tmp_path, "slowed", plant="slow_vec")
    res = _cli("--benchmark-json", slowed)
    assert res.returncode == 2 and "not measured" in res.stderr     # a partial run
    res = _cli("--benchmark-json", slowed, "--allow-missing")
    assert res.returncode == 1, res.stdout + res.stderr
    named = {ln.split()[1] for ln in res.stdout.splitlines() if ln.startswith("regression: ")}
    # the vector env doing twice the work: its share of step_batch regresses (and its per-core
    # gain over the single env may too), nothing else does
    assert name in named and named <= {name, "vec_env_per_core_vs_single_env"}, res.stdout
    as_is = _bench_run(tmp_path, "as_is")
    res = _cli("--benchmark-json", as_is, "--allow-missing")
    assert res.returncode == 0 and "(not in this run)" in res.stdout, res.stdout + res.stderr
    got_slow = compare.figures_from_json(slowed)[name]
    got = compare.figures_from_json(as_is)[name]
    assert got_slow < 0.75 * got


def test_a_figure_below_its_floor_is_measured_again_and_regresses_only_twice():
    values = {k: f["value"] for k, f in BASELINE.items()}
    name = sorted(BASELINE)[0]
    low = BASELINE[name]["value"] * (1 - BASELINE[name]["tolerance"]) * 0.9
    asked = []

    def again(value):
        def remeasure(figures):
            asked.append(figures)
            return {name: value}
        return remeasure

    # a passing disturbance: the second measurement is fine, so no regression
    out = compare.confirm(BASELINE, {**values, name: low}, again(values[name]), progress=None)
    assert asked == [{name}] and compare.compare(BASELINE, out)[1] == []
    # below its floor both times: a regression, reported at the better of the two
    out = compare.confirm(BASELINE, {**values, name: low}, again(low * 0.5), progress=None)
    regressions = compare.compare(BASELINE, out)[1]
    assert out[name] == low and len(regressions) == 1 and name in regressions[0]
    # nothing below a floor: nothing measured again
    asked.clear()
    assert compare.confirm(BASELINE, values, again(0.0), progress=None) == values
    assert asked == []
