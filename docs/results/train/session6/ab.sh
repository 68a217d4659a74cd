#!/bin/bash
PY=/work/main/.venv/bin/python
W=/tmp/t13
out=$W/ab.txt
: > $out
t() { local dir=$1; local name=$2; shift 2; local s=$(date +%s.%N); (cd $W/$dir && env "$@" $PY -m wfrl train --out $W/runs/$name > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "$dir rc=$rc $(echo "$e - $s" | bc) s :: $name $*" >> $out; }
t new new_a X=1
t old old_a X=1
t new new1_a OMP_NUM_THREADS=1
t new new_b X=1
t old old_b X=1
t new new1_b OMP_NUM_THREADS=1
echo DONE >> $out
