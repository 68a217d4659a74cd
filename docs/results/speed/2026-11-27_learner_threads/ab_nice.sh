cd "${1:?usage: ab_nice.sh CLONE_DIR}"
for r in 1 2; do
 for nice in 0 10; do
  t0=$(date +%s.%N); WFRL_WORKER_NICE=$nice .venv/bin/python -m wfrl train --out runs/nice${nice}_$r --force > runs/nice${nice}_$r.log 2>&1; rc=$?; t1=$(date +%s.%N)
  echo "rc=$rc $(echo "$t1 - $t0" | bc) s :: nice $nice round $r"
 done
done; echo DONE
