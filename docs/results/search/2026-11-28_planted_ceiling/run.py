"""The planted benchmark, constrained acquisition only (the record beside this file):
    OMP_NUM_THREADS=1 python docs/results/search/2026-11-28_planted_ceiling/run.py OUT.json
"""
import json
import sys

from wfrl.search.planted import format_planted, run_planted

out = run_planted(range(5), range(20), acquisitions=("constrained",))
print(format_planted(out))
json.dump(out, open(sys.argv[1], "w"), indent=1, default=str)
