#!/usr/bin/env bash
# Default runs (python -m wfrl train, no arguments) in two fresh clones of main — A at commit $2,
# B at $3 — alternated A, B, A, B, ... ($4 pairs, default 3). Prints process wall seconds.
#   bash fresh_ab.sh DIR OLD NEW [PAIRS]
set -u
D=$1; OLD=$2; NEW=$3; N=${4:-3}
rm -rf $D && mkdir -p $D
for v in A B; do
  git clone -q /work/main $D/$v && (cd $D/$v && git checkout -q $([ $v = A ] && echo $OLD || echo $NEW) \
    && ln -s /work/main/.venv .venv && .venv/bin/python setup.py build_ext --inplace -q > /dev/null 2>&1)
  echo "$v = $(cd $D/$v && git rev-parse --short HEAD)"
done
for r in $(seq 1 $N); do
  for v in A B; do
    t0=$(date +%s.%N)
    (cd $D/$v && .venv/bin/python -m wfrl train --out runs/r$r > runs_r$r.log 2>&1)
    rc=$?; t1=$(date +%s.%N)
    echo "$v r$r rc=$rc $(echo "$t1 - $t0" | bc) s"
  done
done
echo DONE
