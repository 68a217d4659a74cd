"""The collectors side by side, each run against the bare environment measured in the same run.

    .venv/bin/python -m pytest bench/test_bench_collectors.py -s

Asserted (ratios measured in one run; they need two idle cores): CybORG, 2 workers —
executor-async efficiency ≥ 0.90, synchronous ≥ 0.80, Ray ≥ 0.80 (efficiency = episodes/s ÷
(workers × bare env episodes/s)); simulator, 2 workers — ≥ 1.8× the sequential collector's
episodes/s (2 would be perfect scaling; 0.2 is the cost of the batch hand-over measured here).
Recorded only (machine-dependent): every episodes/s and the sequential collector's env-steps/s.
"""
import pytest

from wfrl.tools.benchmarks import bench_collectors


def _table(rows):
    return "\n".join(f"  {r['collector']:10s} x{r['n_workers']} {r['episodes_per_s']:10.1f} eps/s "
                     f"{r['steps_per_s']:11.0f} steps/s eff {r['efficiency']:.3f} "
                     f"rss {r.get('worker_rss_mb')}" for r in rows)


def test_collectors_cyborg(benchmark):
    pytest.importorskip("csle_cyborg")
    out = {}
    benchmark.group = "collectors"
    benchmark.pedantic(lambda: out.update(rows=bench_collectors("cyborg", 2, 60)), rounds=1,
                       iterations=1)
    rows = {r["collector"]: r for r in out["rows"]}
    benchmark.extra_info.update({k: v["efficiency"] for k, v in rows.items()})
    # the figures bench/compare.py reads (one whole measurement: rounds=1, no statistics)
    benchmark.extra_info.update({"collector_efficiency_sync_cyborg_2w": rows["sync"]["efficiency"],
                                 "collector_efficiency_async_cyborg_2w":
                                     rows["async"]["efficiency"]})
    print("\ncyborg, 2 workers\n" + _table(out["rows"]))
    assert rows["async"]["efficiency"] >= 0.90
    assert rows["sync"]["efficiency"] >= 0.80
    assert rows["ray"]["efficiency"] >= 0.80


def test_collectors_sim(benchmark):
    out = {}
    benchmark.group = "collectors"
    benchmark.pedantic(lambda: out.update(rows=bench_collectors("sim", 2, 4000)), rounds=1,
                       iterations=1)
    rows = {r["collector"]: r for r in out["rows"]}
    speedup = max(rows["async"]["episodes_per_s"], rows["sync"]["episodes_per_s"]) \
        / rows["sequential"]["episodes_per_s"]
    benchmark.extra_info.update({"parallel_speedup": speedup,
                                 "sequential_steps_per_s": rows["sequential"]["steps_per_s"]})
    print("\nsim, 2 workers\n" + _table(out["rows"]) + f"\n  best parallel / sequential: {speedup:.2f}")
    assert speedup >= 1.8
