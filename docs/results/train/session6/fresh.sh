#!/bin/bash
PY=/work/main/.venv/bin/python
W=/tmp/t13
out=$W/fresh.txt
: > $out
for r in 1 2 3; do s=$(date +%s.%N); (cd $W/fresh && $PY -m wfrl train --out $W/runs/fresh$r > $W/fresh$r.log 2>&1); rc=$?; e=$(date +%s.%N); echo "run $r rc=$rc $(echo "$e - $s" | bc) s (python -m wfrl train, fresh clone of $(git -C $W/fresh rev-parse --short HEAD))" >> $out; done
echo DONE >> $out
