#!/bin/bash
PY=.venv/bin/python
W=${1:-runs/t13}
out=$W/lt.txt
: > $out
t() { local name=$1; shift; local s=$(date +%s.%N); (cd $W/lt && $PY -m wfrl train --out $W/runs/$name "$@" > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "rc=$rc $(echo "$e - $s" | bc) s :: $name $*" >> $out; }
t lt1_a
t lt2_a --learner-threads 2
t lt1_b
t lt2_b --learner-threads 2
echo DONE >> $out
