import json, sys
import numpy as np
def summ(path):
    d = json.load(open(path)); runs = d['runs']['constrained'] if isinstance(d['runs'], dict) else d['runs']
    row = {}
    for k in ('5', '10', '15', '20'):
        ranks = np.array([r['ranks'][k] for r in runs])
        good = np.array([(r['ranks'][k] <= 5) or r['near_best'][k] for r in runs])
        row[k] = (np.median(ranks), good.mean())
    inf = np.mean([r['infeasible_share_after_5'] for r in runs])
    over = np.mean([np.bincount(r['picks']).max() > 20 / 3 for r in runs])
    mx = max(np.bincount(r['picks']).max() for r in runs)
    per = [np.mean([(r['ranks']['15'] <= 5) or r['near_best']['15'] for r in runs if r['instance'] == i]) for i in range(5)]
    return row, inf, over, mx, per
print(f"{'variant':28s} " + " ".join(f"K{k}:med/top5" for k in (5, 10, 15, 20)) + "  infeas>5  >1/3  maxvis  per-inst@15")
for p in sys.argv[1:]:
    row, inf, over, mx, per = summ(p)
    print(f"{p.split('/')[-1][:-5]:28s} " + " ".join(f"{row[k][0]:5.1f}/{row[k][1]:4.0%}" for k in ('5', '10', '15', '20')) + f"  {inf:6.1%}  {over:5.0%}  {mx:3d}   " + " ".join(f"{x:.0%}" for x in per))
