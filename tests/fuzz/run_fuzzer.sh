#!/bin/sh
# Runs one libFuzzer harness for a short time, for `meson test --suite fuzz`:
#   run_fuzzer.sh FUZZER SEEDS WORK SECONDS
# It starts from the committed seed corpus SEEDS; the inputs it finds go to WORK/corpus (never
# into SEEDS) and a crashing input to WORK/crash-<sha1>. Exits non-zero on a crash, a leak or
# a hang.
set -eu
fuzzer=$1 seeds=$2 work=$3 seconds=$4
mkdir -p "$work/corpus"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" "$seeds"
