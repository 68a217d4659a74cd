import json, sys, time
from wfrl.search.planted import run_planted, format_planted
t = time.perf_counter()
res = run_planted(range(5), range(20), acquisitions=("constrained", "random"), batches=(1, 2, 4, 8),
                  progress=lambda l: print(l, flush=True))
res["seconds"] = round(time.perf_counter() - t, 1)
json.dump(res, open(sys.argv[1], "w"), indent=1)
print(format_planted(res))
