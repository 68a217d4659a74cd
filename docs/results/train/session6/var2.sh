#!/bin/bash
PY=/work/main/.venv/bin/python
W=/tmp/t13
out=$W/var2.txt
: > $out
t() { local name=$1; shift; local s=$(date +%s.%N); (cd $W/lt && $PY -m wfrl train --out $W/runs/$name "$@" > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "rc=$rc $(echo "$e - $s" | bc) s :: $name $*" >> $out; }
t v_ep4 --epochs 4
t v_mb2 --minibatches 2
t v_def
echo DONE >> $out
