#!/bin/bash
PY=/work/main/.venv/bin/python
W=/tmp/t13
out=$W/final.txt
: > $out
t() { local dir=$1; local name=$2; local s=$(date +%s.%N); (cd $W/$dir && $PY -m wfrl train --out $W/runs/$name > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "$dir rc=$rc $(echo "$e - $s" | bc) s :: $name" >> $out; }
t cur cur_c
(cd $W/cur && $PY -m wfrl bench train --json > $W/bench_train.json 2> $W/bench_train.err); echo "bench rc=$?" >> $out
echo DONE >> $out
