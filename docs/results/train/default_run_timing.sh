#!/bin/bash
# Default-run timing on this machine: new code (fresh clone of HEAD) x3 and the session-start
# code (c7f9770) x1, full `python -m wfrl train`; then a 10,000-episode attribution set.
PY=/work/main/.venv/bin/python
out=/tmp/w12/timing.txt
: > $out
t() { local dir=$1; shift; local s=$(date +%s.%N); (cd $dir && $PY -m wfrl "$@" > /dev/null 2>/tmp/w12/last_err.txt); local rc=$?; local e=$(date +%s.%N); echo "$(basename $dir) rc=$rc $(echo "$e - $s" | bc) s :: $*" >> $out; }
t /tmp/w12/fresh train --out /tmp/w12/runs/new1
t /tmp/w12/old   train --out /tmp/w12/runs/old1
t /tmp/w12/fresh train --out /tmp/w12/runs/new2
t /tmp/w12/fresh train --out /tmp/w12/runs/new3
for i in 1 2; do
t /tmp/w12/old   train --total-episodes 10000 --out /tmp/w12/runs/a_old_$i
t /tmp/w12/old   train --total-episodes 10000 --no-memory --no-mask --out /tmp/w12/runs/a_oldplain_$i
t /tmp/w12/fresh train --total-episodes 10000 --no-overlap --out /tmp/w12/runs/a_newno_$i
t /tmp/w12/fresh train --total-episodes 10000 --out /tmp/w12/runs/a_new_$i
done
echo DONE >> $out
