"""The planted benchmark, constrained acquisition: how often the predicted feasible set is right
when some workflows are truly unfollowable, as the search reports it (P(feasible) ≥ 0.5) and
with the workflows "at θ" counted followable (a workflow called unfollowable only when
P(feasible) < 1 − SURE_LEVEL). The acquisition is the same under both, so both are read from the
same runs.

    OMP_NUM_THREADS=1 python docs/results/search/2026-11-28_followable_level/planted.py OUT.json
"""
import json
import sys

from wfrl.search.planted import format_planted, run_planted

out = run_planted(range(5), range(20), acquisitions=("constrained",))
print(format_planted(out))
json.dump(out, open(sys.argv[1], "w"), indent=1, default=str)
