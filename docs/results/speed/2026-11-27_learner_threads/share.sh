#!/bin/bash
PY=.venv/bin/python
out=runs/t13/share.txt; : > $out
for r in 1 2 3; do for sh in 0 0.3333334 0.6 1.0; do
  s=$(date +%s.%N)
  (cd runs/t13/share && WFRL_SHARE=$sh $PY -m wfrl train --workflow critical_first --collector async --total-episodes 10000 --episodes-per-update 50 --min-episodes 10000 --out runs/t13/sh_${sh}_$r --force > runs/t13/sh.log 2>&1)
  e=$(date +%s.%N); echo "share $sh rep $r $(echo "$e - $s" | bc)" >> $out
done; done; echo DONE >> $out
