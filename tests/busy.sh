#!/usr/bin/env bash
# The suite on a busy machine: four CPU-bound processes run beside it while a pytest command
# runs twice in a row; each run's result line and seconds are printed, and the script fails
# if either run does. No test may depend on how fast or how loaded the machine is.
#
#   bash tests/busy.sh                                  # the whole suite
#   bash tests/busy.sh .venv/bin/python -m pytest -q -x -p no:cacheprovider tests/apps/test_timeline.py
#
# HOGS (default 4) and RUNS (default 2) change how many of each.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -eq 0 ]; then
  set -- .venv/bin/python -m pytest -q -x -p no:cacheprovider
fi
HOGS=${HOGS:-4}
RUNS=${RUNS:-2}

hogs=()
cmd=""
log=$(mktemp)
cleanup() {
  if [ -n "$cmd" ]; then kill "$cmd" 2>/dev/null || true; fi
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -f "$log"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
for _ in $(seq 1 "$HOGS"); do
  python3 -c 'while True: pass' &
  hogs+=("$!")
done
echo "CPU-bound processes beside the tests: $HOGS (pids ${hogs[*]}), on $(nproc) CPUs; command: $*"

failed=0
for run in $(seq 1 "$RUNS"); do
  start=$(date +%s.%N)
  rc=0
  # In the background, waited for: a signal to this script ends the run and the hogs at once.
  "$@" >"$log" 2>&1 &
  cmd=$!
  wait "$cmd" || rc=$?
  cmd=""
  seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  result=$(grep -E '[0-9]+ (passed|failed|error)' "$log" | tail -n 1 || true)
  echo "run $run/$RUNS: ${result:-no result line} (exit $rc, ${seconds} s)"
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log"
    failed=1
  fi
done
exit "$failed"
