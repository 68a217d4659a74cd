#!/bin/bash
# Default-run timing on this machine: `python -m wfrl train` with no arguments in a fresh clone of
# this code (x3) and of the code before the compiled policy head (d394da3, x2), alternated; the
# clones are built in place (setup.py build_ext --inplace) and run with the project's venv.
#   bash docs/results/train/default_run_timing.sh      # ~20 min on the 2-core VM
PY=/work/main/.venv/bin/python
W=/tmp/w12b
out=$W/timing.txt
: > $out
t() { local dir=$1; shift; local s=$(date +%s.%N); (cd $W/$dir && $PY -m wfrl "$@" > $W/$(basename ${@: -1}).log 2>&1); local rc=$?; local e=$(date +%s.%N); echo "$dir rc=$rc $(echo "$e - $s" | bc) s :: $*" >> $out; }
t fresh train --out $W/runs/new1
t old   train --out $W/runs/old1
t fresh train --out $W/runs/new2
t old   train --out $W/runs/old2
t fresh train --out $W/runs/new3
echo DONE >> $out
