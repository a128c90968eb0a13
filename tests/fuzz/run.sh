#!/usr/bin/env bash
# Runs the libFuzzer harnesses built in BUILD (make fuzz), one process at a
# time, each for SECONDS on its seeds (tests/fuzz/corpus/NAME, only read) and
# the inputs its earlier runs kept (BUILD/fuzz-corpus/NAME). Stops at the
# first finding: a crash, a leak, undefined behaviour, an exception other than
# InputError, an input taking over 10 s or 2 GB; the input is saved under
# BUILD/fuzz-findings/ and the log's end printed. Full logs: BUILD/fuzz-logs/.
# Usage: run.sh BUILD SECONDS [NAME...] (default: every corpus folder).
# FUZZ_RUNS=N ends a harness after N executions if that comes before SECONDS.
set -euo pipefail
build=$1
seconds=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(ls "$src/corpus"))
mkdir -p "$build/fuzz-findings" "$build/fuzz-logs"
for name in "${names[@]}"; do
  case $name in
    set_option | stages | straggler | devices | units) max_len=1024 dict= ;;  # command-line strings
    pipedream_graph) max_len=65536 dict=-dict=$src/graph.dict ;;
    idx | chakra_plan) max_len=65536 dict= ;;                                   # binary files
    *) max_len=65536 dict=-dict=$src/json.dict ;;                             # JSON files
  esac
  mkdir -p "$build/fuzz-corpus/$name"
  log=$build/fuzz-logs/$name.log
  start=$SECONDS
  if ! "$build/tests/fuzz/fuzz_$name" "$build/fuzz-corpus/$name" "$src/corpus/$name" \
      -max_total_time="$seconds" -runs="${FUZZ_RUNS:--1}" -max_len=$max_len $dict -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$build/fuzz-findings/$name-" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz_$name: FINDING (input under $build/fuzz-findings/, log $log)"
    exit 1
  fi
  took=$((SECONDS - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
  cov=$(sed -E 's/.*cov: ([0-9]+).*/\1/' <<<"$last")
  ft=$(sed -E 's/.*ft: ([0-9]+).*/\1/' <<<"$last")
  corp=$(sed -E 's/.*corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/' <<<"$last")
  echo "fuzz_$name: $runs runs in $took s, cov $cov, ft $ft, corpus $corp, peak rss ${rss} MB, no findings"
done
