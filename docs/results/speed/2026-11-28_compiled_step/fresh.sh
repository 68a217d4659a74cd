#!/usr/bin/env bash
# Three default runs (python -m wfrl train, no arguments) in a fresh clone of main, one after the other.
set -u
REPO=${REPO:?the repository to clone}; D=${1:?usage: REPO=PATH fresh.sh DIR}; rm -rf $D && git clone -q $REPO $D && cd $D && ln -s $REPO/.venv .venv
.venv/bin/python setup.py build_ext --inplace -q > /dev/null 2>&1
echo "code $(git rev-parse --short HEAD)"
for r in 1 2 3; do
  t0=$(date +%s.%N)
  .venv/bin/python -m wfrl train --out runs/fresh$r > runs_fresh$r.log 2>&1
  rc=$?; t1=$(date +%s.%N)
  echo "rc=$rc $(echo "$t1 - $t0" | bc) s :: fresh$r"
done
echo DONE
