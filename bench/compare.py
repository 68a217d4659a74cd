"""Benchmark regressions against a committed baseline of machine-independent figures, read from
pytest-benchmark's JSON.

    .venv/bin/python bench/compare.py --fast             # run the fast subset's bench tests, compare
    .venv/bin/python bench/compare.py                    # every figure (needs two idle cores)
    .venv/bin/python -m pytest bench/ --benchmark-json F.json && \
        .venv/bin/python bench/compare.py --benchmark-json F.json    # a run made before
    .venv/bin/python bench/compare.py --benchmark-json .benchmarks/<machine>/0001_x.json
    .venv/bin/python bench/compare.py --results R.json   # figures as {name: value}

Every figure is a ratio that one bench test (FIGURE_TESTS) measures and stores in its
pytest-benchmark extra_info under the figure's name: CPU times of two things interleaved round
by round in one process, so the speed of the machine, its drift and other processes' load
cancel; all are "higher is better". Without --benchmark-json / --results this script runs those
bench tests itself (pytest bench/... --benchmark-json) and reads their JSON: the figures are the
bench tests' own, never timed a second time here. A figure regresses when it falls below its
baseline × (1 − tolerance) in two measurements when this script runs the bench tests (the bench
test of a figure below its floor is run once more, and the better of the two is compared; a JSON
given with --benchmark-json is one measurement, compared as it is); the baseline file
(bench/baseline.json) gives each figure's value, tolerance and the reason for that tolerance.
Exit status: 0 no regression, 1 at least one (each named on its own line), 2 bad input or a figure
of the subset that was not measured (a skipped bench test; --allow-missing compares a partial
JSON). docs/benchmark-regressions.md describes the figures, the baseline and how
to renew it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = Path(__file__).with_name("baseline.json")

# figure -> the bench test that measures it (and stores it in its extra_info)
FIGURE_TESTS = {
    "sim_vs_cyborg_step": "bench/test_bench_sim.py::test_speed_targets",
    "vec_env_vs_step_batch": "bench/test_bench_vec.py::test_vec_targets",
    "vec_env_per_core_vs_single_env": "bench/test_bench_vec.py::test_vec_targets",
    "sequential_collector_vs_bare_cyborg":
        "bench/test_bench_cyborg.py::test_collector_overhead_ratio",
    "collector_efficiency_async_cyborg_2w": "bench/test_bench_collectors.py::test_collectors_cyborg",
    "collector_efficiency_sync_cyborg_2w": "bench/test_bench_collectors.py::test_collectors_cyborg",
    "update_default_vs_original": "bench/test_bench_train.py::test_train_update_and_overlap",
    "update_default_vs_autograd": "bench/test_bench_train.py::test_train_update_and_overlap",
    "update_compiled_vs_torch_steps": "bench/test_bench_train.py::test_train_update_and_overlap",
}


class BadInput(Exception):
    pass


def figures_from_json(path) -> dict:
    """{figure: value} of a pytest-benchmark JSON (a --benchmark-json output or a saved run):
    every extra_info entry named like a figure of FIGURE_TESTS."""
    try:
        data = json.loads(Path(path).read_text())
        return {k: float(v) for b in data["benchmarks"]
                for k, v in (b.get("extra_info") or {}).items() if k in FIGURE_TESTS}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise BadInput(f"bad pytest-benchmark JSON {path}: {e}") from None


def run_bench(tests, json_path, progress=print) -> None:
    """Run the bench tests (pytest node ids) with --benchmark-json json_path. A bench test that
    fails its own target still records its figures; whether they regress is decided here."""
    cmd = [sys.executable, "-m", "pytest", *sorted(set(tests)), "--benchmark-json",
           str(json_path), "-q", "-p", "no:cacheprovider", "--benchmark-columns=median,rounds"]
    if progress:
        progress("  running " + " ".join(sorted(set(tests))))
    # (a pytest run's own PYTEST_* variables stay out: under pytest-xdist's PYTEST_XDIST_WORKER,
    # pytest-benchmark turns itself off)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if progress and res.returncode not in (0, 1):
        progress(res.stdout[-2000:] + res.stderr[-2000:])


def measure(figures, progress=print) -> dict:
    """The figures measured by running their bench tests once, through pytest-benchmark's JSON."""
    with tempfile.TemporaryDirectory(prefix="wfrl-compare-") as d:
        path = Path(d) / "bench.json"
        run_bench([FIGURE_TESTS[f] for f in figures], path, progress)
        if not path.exists():
            raise BadInput("the bench run wrote no JSON (see its output above)")
        got = figures_from_json(path)
    return {k: v for k, v in got.items() if k in figures}


def below_floor(baseline: dict, results: dict) -> list[str]:
    return [n for n, v in results.items() if n in baseline and
            v < float(baseline[n]["value"]) * (1.0 - float(baseline[n]["tolerance"]))]


def confirm(baseline: dict, results: dict, remeasure=None, progress=print) -> dict:
    """Measure once more every figure below its floor (running its bench test again) and keep,
    per figure, the better of its two measurements: on a shared machine timing noise only ever
    slows a figure down (a busy neighbour, a scheduler slice), so a real regression shows in both
    measurements and a passing disturbance in one. remeasure(figures) -> {figure: value}
    (default: measure)."""
    low = below_floor(baseline, results)
    if not low:
        return results
    remeasure = remeasure or (lambda figures: measure(figures, progress=progress))
    again = remeasure(set(low))
    out = dict(results)
    for n in low:
        if n in again:
            if progress:
                progress(f"  {n} below its floor: measured again, {out[n]:.3g} then {again[n]:.3g}")
            out[n] = max(out[n], again[n])
    return out


# ------------------------------------------------------------------------------- the comparison
def load_baseline(path=BASELINE) -> dict:
    try:
        data = json.loads(Path(path).read_text())
        figs = data["figures"]
        for name, f in figs.items():
            if not (float(f["value"]) > 0 and 0 <= float(f["tolerance"]) < 1):
                raise ValueError(name)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"compare: error: bad baseline {path}: {e}") from None
    return figs


def compare(baseline: dict, results: dict) -> tuple[list[str], list[str]]:
    """(report lines, regression lines). A figure of the baseline that was measured regresses
    below value × (1 − tolerance); figures measured but not in the baseline are reported only."""
    lines, regressions = [], []
    for name, value in results.items():
        if name not in baseline:
            lines.append(f"  {name:40s} {value:10.3f}   (not in the baseline)")
            continue
        b = baseline[name]
        floor = float(b["value"]) * (1.0 - float(b["tolerance"]))
        ok = value >= floor
        lines.append(f"  {name:40s} {value:10.3f}   baseline {float(b['value']):10.3f}   "
                     f"floor {floor:10.3f}   {'ok' if ok else 'REGRESSION'}")
        if not ok:
            regressions.append(f"regression: {name} = {value:.3f} < {floor:.3f} (baseline "
                               f"{float(b['value']):.3f} - {100 * float(b['tolerance']):.0f} %)")
    return lines, regressions


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/compare.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--fast", action="store_true", help="only the fast subset's figures")
    p.add_argument("--baseline", default=str(BASELINE), help="baseline JSON")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--benchmark-json", metavar="F", help="read the figures from this "
                     "pytest-benchmark JSON (--benchmark-json of a run, or a saved run) instead of "
                     "running the bench tests")
    src.add_argument("--results", help="compare figures from this JSON ({name: value})")
    p.add_argument("--save", help="write the compared figures to this JSON ({name: value})")
    p.add_argument("--allow-missing", action="store_true", help="with --benchmark-json: compare "
                   "the figures the run holds (e.g. one bench test's run) instead of failing on "
                   "the others")
    a = p.parse_args(argv)
    baseline = load_baseline(a.baseline)
    wanted = [n for n, f in baseline.items() if not a.fast or f.get("fast")]
    try:
        if a.results:
            try:
                results = {k: float(v) for k, v in json.loads(Path(a.results).read_text()).items()}
            except (OSError, ValueError, AttributeError) as e:
                raise BadInput(f"bad results {a.results}: {e}") from None
        elif a.benchmark_json:
            results = {k: v for k, v in figures_from_json(a.benchmark_json).items()
                       if k in wanted}
        else:
            t = time.perf_counter()
            results = confirm(baseline, measure(wanted))
            print(f"measured in {time.perf_counter() - t:.0f} s")
        if not a.results:
            missing = [n for n in wanted if n not in results
                       and (n != "update_compiled_vs_torch_steps" or _compiled_fast())]
            if a.benchmark_json and not results:
                raise BadInput(f"{a.benchmark_json} holds none of the figures")
            if missing and not (a.benchmark_json and a.allow_missing):
                raise BadInput(f"not measured: {', '.join(missing)} (their bench tests: "
                               f"{', '.join(sorted({FIGURE_TESTS[n] for n in missing}))})")
    except BadInput as e:
        print(f"compare: error: {e}", file=sys.stderr)
        return 2
    if a.save:
        Path(a.save).write_text(json.dumps(results, indent=1) + "\n")
    lines, regressions = compare(baseline, results)
    if a.benchmark_json:   # (only with --allow-missing)
        lines += [f"  {n:40s} (not in this run)" for n in wanted if n not in results]
    print("\n".join(lines))
    for r in regressions:
        print(r)
    if not regressions:
        print(f"no regression ({len(results)} figures)")
    return 1 if regressions else 0


def _compiled_fast() -> bool:
    """Whether this machine runs the compiled update step (AVX-512): only then is
    update_compiled_vs_torch_steps measured."""
    try:
        from wfrl.ppo.learner import COMPILED_FAST
    except ImportError:
        return False
    return bool(COMPILED_FAST)


if __name__ == "__main__":
    sys.exit(main())
