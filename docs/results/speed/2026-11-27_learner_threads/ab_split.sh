for r in 1 2; do
 for c in base new; do
  cd "$WORK/$c"; t0=$(date +%s.%N); .venv/bin/python -m wfrl train --out runs/ab_$r --force > runs/ab_$r.log 2>&1; rc=$?; t1=$(date +%s.%N)
  echo "rc=$rc $(echo "$t1 - $t0" | bc) s :: $c round $r $(git -C "$WORK/$c" rev-parse --short HEAD)"
 done
done; echo DONE
