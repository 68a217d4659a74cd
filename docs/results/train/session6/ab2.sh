#!/bin/bash
PY=/work/main/.venv/bin/python
W=/tmp/t13
out=$W/ab2.txt
: > $out
t() { local dir=$1; local name=$2; local s=$(date +%s.%N); (cd $W/$dir && $PY -m wfrl train --out $W/runs/$name > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "$dir rc=$rc $(echo "$e - $s" | bc) s :: $name" >> $out; }
t cur cur_a
t old old_a
t cur cur_b
t old old_b
echo DONE >> $out
