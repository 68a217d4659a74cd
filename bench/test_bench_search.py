"""Search quality against the exhaustive ground truth (issue: workflow search).

    .venv/bin/python -m pytest bench/test_bench_search.py -s      # ≈ 40 min on 2 cores

Ground truth: bench/data/exhaustive_B_lineAgent_conditioned.csv, written by
    python -m wfrl exhaustive --protocol conditioned --eval-episodes 500 --repeats 10 --out DIR
(ten order-conditioned policies, seeds 0–9, each trained 40,000 episodes on random workflows and
evaluated 500 episodes per workflow; override with WFRL_EXHAUSTIVE=path, e.g. the older
bench/data/exhaustive_B_lineAgent_finetune.csv: base + 1,000 episodes per workflow, 3 runs).

For each of 10 seeds a default search (GP-UCB) and the same search with random acquisition run 20
evaluations; after K = 5, 10, 15, 20 the workflow each would report is looked up in the table.
The oracle random bound (true best of K random workflows) is printed too, and the table's
workflow-effect test: if its rewards do not differ by more than training randomness, nothing can
beat random search on it. Targets (the issue's): after 15 evaluations the search's pick is in the
top 5 or within 2 standard errors of the best in ≥ 8 of 10 seeds, and its median rank beats random
search's at K = 10 and 15. On the committed B_line table this benchmark FAILS, as measured
(README, "Ground truth and search quality"): the table's rewards show no workflow effect, so both
searches pick at chance. It is left failing rather than marked xfail: it is the check a ground
truth with a real effect (another scenario, red agent or compliance rule) must pass.
"""
import json
import os
from pathlib import Path

import pytest

from wfrl.search.quality import run_quality

DATA = Path(__file__).parent / "data" / "exhaustive_B_lineAgent_conditioned.csv"


def test_search_quality(benchmark, tmp_path):
    truth = Path(os.environ.get("WFRL_EXHAUSTIVE", DATA))
    if not truth.exists():
        pytest.fail(f"ground truth {truth} missing; run `wfrl exhaustive` (see docstring)")
    out = {}

    def show(e):
        print(f"  {e['acquisition']:6s} seed {e['seed']}: episodes {e['episodes']}  "
              f"{e['wall_s']:.0f} s", flush=True)

    benchmark.group = "search"
    benchmark.pedantic(lambda: out.update(run_quality(truth, workdir=tmp_path, progress=show)),
                       rounds=1, iterations=1)
    print(f"\nbest of 120: {out['best']} ({out['best_reward']:.2f})")
    print(f"workflows within 2 SE of the best: {out['workflows_within_2se_of_best']} of 120")
    eff = out["workflow_effect"]
    if eff:
        print(f"workflow effect in the ground truth: F = {eff['F']:.2f} ({eff['df_workflow']}, "
              f"{eff['df_residual']} df), p = {eff['p_value']:.3g}, workflow sd "
              f"{eff['workflow_sd']:.2f} vs run noise sd {eff['run_noise_sd']:.2f}, Friedman p = "
              f"{eff['friedman_p_value']:.3g}, mean Spearman "
              f"between runs {eff['mean_spearman_between_runs']:.2f}")
    print(f"{'K':>3} {'constrained median':>14} {'top-5/2 SE':>11} {'random median':>14} "
          f"{'top-5/2 SE':>11} {'oracle random':>14}")
    for r in out["table"]:
        print(f"{r['K']:3d} {r['constrained_median_rank']:14.1f} {r['constrained_top5_or_2se']:11d} "
              f"{r['random_median_rank']:14.1f} {r['random_top5_or_2se']:11d} "
              f"{r['oracle_random_median_rank']:14.1f}")
        print(f"      ranks GP-UCB {r['constrained_ranks']}  random {r['random_ranks']}")
    benchmark.extra_info["table"] = out["table"]
    benchmark.extra_info["workflow_effect"] = eff
    (tmp_path / "quality.json").write_text(json.dumps(out, indent=1))
    by_k = {r["K"]: r for r in out["table"]}
    assert by_k[15]["constrained_top5_or_2se"] >= 8
    assert by_k[10]["constrained_median_rank"] < by_k[10]["random_median_rank"]
    assert by_k[15]["constrained_median_rank"] < by_k[15]["random_median_rank"]


def test_planted_search_quality(benchmark):
    """Planted ground truths (wfrl.search.planted): 5 instances × 20 seeds per acquisition, K = 5,
    10, 15, 20. The issue's targets: after 15 evaluations the feasibility-aware GP-UCB's reported
    best is among the 5 best feasible (or within 2 noise SE of the best) in ≥ 90 % of runs, its
    median rank beats random's and the original acquisition's at K = 10 and 15, and after the 5th
    evaluation ≤ 20 % of its evaluations go to infeasible workflows.
        .venv/bin/python -m pytest bench/test_bench_search.py -k planted -s   # ≈ 15 min
    """
    from wfrl.search.planted import format_planted, run_planted
    out = {}
    benchmark.group = "search"
    benchmark.pedantic(lambda: out.update(run_planted(range(5), range(20))), rounds=1,
                       iterations=1)
    print("\n" + format_planted(out))
    benchmark.extra_info["table"] = out["table"]
    benchmark.extra_info["infeasible_share_after_5"] = out["infeasible_share_after_5"]
    k = {r["K"]: r for r in out["table"]}
    for K in (10, 15):
        assert k[K]["constrained"]["median_rank"] < k[K]["random"]["median_rank"]
        assert k[K]["constrained"]["median_rank"] < k[K]["original"]["median_rank"]
    assert out["infeasible_share_after_5"]["constrained"] <= 0.20
    assert k[15]["constrained"]["top5_or_2se"] >= 0.90


def test_planted_search_quality_with_visits_in_flight(benchmark):
    """Planted ground truths with K = 1, 2, 4, 8 visits in flight (--concurrent-visits): the
    default acquisition and random, 5 instances × 20 seeds. What each K costs in quality at the
    same number of visits told; the figures of docs/scale.md (record
    docs/results/search/2026-12-05_planted_batches/).
        .venv/bin/python -m pytest bench/test_bench_search.py -k in_flight -s   # ≈ 8 min
    """
    from wfrl.search.planted import format_planted, run_planted
    out = {}
    benchmark.group = "search"
    benchmark.pedantic(lambda: out.update(run_planted(range(5), range(20),
                                                      acquisitions=("constrained", "random"),
                                                      batches=(1, 2, 4, 8))),
                       rounds=1, iterations=1)
    print("\n" + format_planted(out))
    benchmark.extra_info["table"] = out["table"]
    k = {r["K"]: r for r in out["table"]}
    # every batch size beats random at 15 and 20 visits told (K ≤ 4 already at 10; a batch of
    # 8 in 10 visits is almost all design), and a batch of 2 costs at most one rank of the
    # median and 10 points of the good rate at 15
    for method in ("constrained", "constrained_k2", "constrained_k4", "constrained_k8"):
        for K in (10, 15, 20):
            if K == 10 and method == "constrained_k8":
                continue
            assert k[K][method]["median_rank"] < k[K]["random"]["median_rank"], (method, K)
    assert k[15]["constrained_k2"]["median_rank"] <= k[15]["constrained"]["median_rank"] + 1
    assert k[15]["constrained_k2"]["top5_or_2se"] >= k[15]["constrained"]["top5_or_2se"] - 0.10
