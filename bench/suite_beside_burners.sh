#!/usr/bin/env bash
# The whole test suite, RUNS times in a row (default 3), beside two CPU-burning processes:
# the suite must not depend on how fast the machine is. Run from a checkout with the test
# extra installed; it stops at the first failing run. Each run's output goes to
# $LOG_DIR/run-N.log, and one line per run (result, load average, the burners' CPU time) to
# $LOG_DIR/summary.log.
set -u
RUNS=${RUNS:-3}
LOG_DIR=${LOG_DIR:-$(mktemp -d -t roder-burners-XXXX)}
mkdir -p "$LOG_DIR"
python3 -c 'while True: pass' & B1=$!
python3 -c 'while True: pass' & B2=$!
trap 'kill $B1 $B2 2>/dev/null' EXIT
echo "commit $(git rev-parse --short HEAD 2>/dev/null) burners $B1 $B2" | tee "$LOG_DIR/summary.log"
for i in $(seq 1 "$RUNS"); do
  echo "run $i start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG_DIR/summary.log"
  TMPDIR=$(mktemp -d) python -m pytest -q -x --timeout=300 -p no:cacheprovider > "$LOG_DIR/run-$i.log" 2>&1
  rc=$?
  echo "run $i rc=$rc end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $(tail -1 "$LOG_DIR/run-$i.log")" | tee -a "$LOG_DIR/summary.log"
  ps -p "$B1,$B2" -o pid=,time= | sed 's/^/  burner cpu: /' | tee -a "$LOG_DIR/summary.log"
  [ "$rc" = 0 ] || exit "$rc"
done
echo "logs in $LOG_DIR"
