#!/usr/bin/env bash
# Runs every libFuzzer harness (tests/fuzz/, docs/fuzzing.md) for RUNS executions from its seed
# corpus and prints a Markdown table: harness, executions, crashes (goal 0), seconds, exec/s.
# The inputs found stay in build-fuzz/fuzz-bench/<harness>/corpus, a crash's input and log
# beside them. Needs build-fuzz/ (.ci/setup --fuzz makes it).
# Usage: bench/fuzz.sh [RUNS [JOBS [HARNESS...]]]   (default: 1000000 executions each, 2 harnesses
# at a time, every harness)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000}
jobs=${2:-2}
shift $(($# < 2 ? $# : 2))

if [ ! -f build-fuzz/build.ninja ]; then
	echo "bench/fuzz.sh: no build-fuzz/; make it with .ci/setup --fuzz" >&2
	exit 1
fi
ninja -C build-fuzz || exit 1

# One harness: its run, then one line "name executions crashes seconds" in its folder.
fuzz_one() {
	local name=$1 runs=$2 work=build-fuzz/fuzz-bench/$1 start end executions crashes
	rm -rf "$work"
	mkdir -p "$work/corpus"
	start=$(date +%s.%N)
	build-fuzz/tests/fuzz/fuzz_"$name" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" \
		tests/fuzz/corpus/"$name" >"$work/log" 2>&1
	end=$(date +%s.%N)
	executions=$(sed -n 's/^stat::number_of_executed_units: //p' "$work/log")
	crashes=$(find "$work" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'leak-*' \
		-o -maxdepth 1 -name 'timeout-*' -o -maxdepth 1 -name 'oom-*' | wc -l)
	echo "$name ${executions:-0} $crashes $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')" >"$work/result"
}
export -f fuzz_one

names=${*:-$(cd tests/fuzz && ls fuzz_*.c | sed -n 's/^fuzz_\(.*\)\.c$/\1/p')}
printf '%s\n' $names | xargs -P "$jobs" -I{} bash -c 'fuzz_one "$@"' _ {} "$runs"

status=0
echo "| harness | executions | crashes | seconds | exec/s |"
echo "|---|---:|---:|---:|---:|"
for name in $names; do
	read -r _ executions crashes seconds <build-fuzz/fuzz-bench/"$name"/result
	printf '| %s | %s | %s | %.0f | %.0f |\n' "$name" "$executions" "$crashes" "$seconds" \
		"$(awk -v e="$executions" -v s="$seconds" 'BEGIN { print e / s }')"
	if [ "$crashes" -ne 0 ] || [ "$executions" -lt "$runs" ]; then
		status=1
		echo "  $name: see build-fuzz/fuzz-bench/$name/log" >&2
	fi
done
exit $status
