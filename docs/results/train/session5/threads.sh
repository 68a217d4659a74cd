#!/bin/bash
# Default run (`python -m wfrl train`, no arguments) of this code with torch's default thread count
# (2 on this VM; the learner leaves one core to the collectors for the first third of each
# update) and with OMP_NUM_THREADS=1 (one learner thread throughout), alternated.
PY=/work/main/.venv/bin/python
W=/tmp/t12
out=$W/threads.txt
: > $out
t() { local name=$1; shift; local s=$(date +%s.%N); (cd $W/new2 && env "$@" $PY -m wfrl train --out $W/runs/$name > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "$name rc=$rc $(echo "$e - $s" | bc) s :: $*" >> $out; }
t thr2_a X=1
t thr1_a OMP_NUM_THREADS=1
t thr1_b OMP_NUM_THREADS=1
t thr2_b X=1
echo DONE >> $out
