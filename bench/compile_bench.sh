#!/bin/sh
# Times `kagent compile` cold (empty cache) and warm (cached) against
# `nvcc -cubin -arch=sm_90a` on the same file: several runs each, median of
# the wall-clock times of whole processes. Not a test; numbers go to
# docs/benchmarks.md ("kagent compile").
#
# usage: bench/compile_bench.sh [BUILD_DIR] [SOURCE.cu] [RUNS]
set -eu

build=${1:-/tmp/b-compile}
source=${2:-$(dirname "$0")/kernels/sgemm_tiled.cu}
runs=${3:-7}
kagent=$build/kagent
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

[ -x "$kagent" ] || { echo "no kagent binary at $kagent (build it first)" >&2; exit 2; }

now() { date +%s.%N; }

# Runs "$@" once and prints its wall time in seconds.
time_once() {
	start=$(now)
	"$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
	end=$(now)
	awk -v s="$start" -v e="$end" 'BEGIN { printf "%.4f\n", e - s }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

cold=$scratch/cold.txt warm=$scratch/warm.txt ref=$scratch/nvcc.txt
: >"$cold"; : >"$warm"; : >"$ref"
i=0
while [ "$i" -lt "$runs" ]; do
	rm -rf "$scratch/cache"
	KAGENT_CACHE_DIR=$scratch/cache time_once "$kagent" compile "$source" -o "$scratch/k.cubin" >>"$cold"
	KAGENT_CACHE_DIR=$scratch/cache time_once "$kagent" compile "$source" -o "$scratch/k.cubin" >>"$warm"
	if [ -x "$nvcc" ]; then
		time_once "$nvcc" -cubin -arch=sm_90a -o "$scratch/n.cubin" "$source" >>"$ref"
	fi
	i=$((i + 1))
done
KAGENT_CACHE_DIR=$scratch/cache "$kagent" compile "$source" --no-cache | tail -n 4

cold_median=$(median <"$cold")
warm_median=$(median <"$warm")
echo "source:     $source ($runs runs each, median wall seconds)"
echo "kagent cold: $cold_median   ($(tr '\n' ' ' <"$cold"))"
echo "kagent warm: $warm_median   ($(tr '\n' ' ' <"$warm"))"
if [ -s "$ref" ]; then
	ref_median=$(median <"$ref")
	echo "nvcc -cubin: $ref_median   ($(tr '\n' ' ' <"$ref"))"
	echo "ratio nvcc / kagent cold: $(awk -v a="$ref_median" -v b="$cold_median" 'BEGIN { printf "%.1f", a / b }')"
	echo "ratio nvcc / kagent warm: $(awk -v a="$ref_median" -v b="$warm_median" 'BEGIN { printf "%.0f", a / b }')"
fi
