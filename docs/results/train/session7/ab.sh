#!/usr/bin/env bash
# Default runs (python -m wfrl train) with one flag changed, alternated round by round, in a clone of
# the code under test:  bash ab.sh CLONE ROUNDS VARIANT=FLAGS...   (writes CLONE/runs/VARIANT_ROUND)
set -u
CLONE=$1; ROUNDS=$2; shift 2
cd "$CLONE"
for r in $(seq 1 "$ROUNDS"); do
  for v in "$@"; do
    name=${v%%=*}; flags=${v#*=}
    t0=$(date +%s.%N)
    .venv/bin/python -m wfrl train --out "runs/${name}_$r" --force $flags > "runs/${name}_$r.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    echo "rc=$rc $(echo "$t1 - $t0" | bc) s :: ${name}_$r $flags"
  done
done
echo DONE
