#!/bin/bash
# Default-run timing: `python -m wfrl train` with no arguments, fresh clones of this code (new) and
# of the code before this session's speed work (old, e98504f), alternated; clones built in place.
PY=/work/main/.venv/bin/python
W=/tmp/t12
out=$W/timing.txt
: > $out
t() { local dir=$1; local name=$2; local s=$(date +%s.%N); (cd $W/$dir && $PY -m wfrl train --out $W/runs/$name > $W/$name.log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "$dir rc=$rc $(echo "$e - $s" | bc) s :: train --out runs/$name" >> $out; }
t new new1
t old old1
t new new2
t new new3
echo DONE >> $out
