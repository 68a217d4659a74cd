#!/bin/bash
PY=/work/main/.venv/bin/python
W=/tmp/t12
out=$W/ab.txt
: > $out
t() { local dir=$1; local name=$2; local s=$(date +%s.%N); (cd $W/$dir && $PY -m wfrl train --out $W/runs/$name > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "$dir rc=$rc $(echo "$e - $s" | bc) s :: $name" >> $out; }
t new ab_8683
t new2 ab_7661
t new ab_8683b
echo DONE >> $out
