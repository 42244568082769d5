#!/bin/sh
# Black-box tests of the kagent binary: usage errors, the no-GPU path, and `kagent eval
# --device cpu` end to end against the fake worker (tests/fixtures/fake_runner). TAP output.
set -u
KAGENT=${KAGENT:?path to the kagent binary}
SOURCE=${KAGENT_SOURCE_DIR:?source folder}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kagent-cli-XXXXXX")
trap 'kill $WORKER_PID 2>/dev/null; rm -rf "$WORK"' EXIT
WORKER_PID=
export KAGENT_CACHE_DIR="$WORK/cache" KAGENT_RUNNER_DIR="$SOURCE/tests/fixtures/fake_runner"
export KAGENT_PYTHON=python3 KAGENT_LIBCUDA="$WORK/no-libcuda.so.1" TMPDIR="$WORK"
export KAGENT_WORKER_SOCKET="$WORK/none.sock"
unset FAKE_WORKER_MODE FAKE_WORKER_RESULT
printf 'import torch\nclass Model: pass\n' > "$WORK/p.py"
printf 'import triton\n@triton.jit\ndef k(): pass\nclass ModelNew: pass\n' > "$WORK/c.py"

. "$(dirname "$0")/tap.sh"
# json_field FILE EXPRESSION: prints a field of the JSON object in FILE.
json_field() { python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print($2)" "$1"; }
one_object() { python3 -c "import json,sys; t=open(sys.argv[1]).read(); json.loads(t)" "$1"; }

echo "1..47"
check "missing problem" 2 "" "cannot read the problem $WORK/missing.py" -- eval "$WORK/missing.py" "$WORK/c.py"
check "missing candidate json" 2 '"error":"io"' "cannot read the candidate" -- eval "$WORK/p.py" "$WORK/nope.py" --json
check "no gpu json" 2 '"error":"no_gpu"' "no NVIDIA driver found" -- eval "$WORK/p.py" "$WORK/c.py" --json
if one_object "$WORK/out" && [ "$(wc -l < "$WORK/out")" -eq 1 ]; then ok "no gpu: exactly one JSON object"; else not_ok "no gpu: exactly one JSON object" "$(cat "$WORK/out")"; fi
check "gpu command" 2 "" "this machine has no usable GPU" -- gpu
check "bad flag" 2 "" "usage: kagent eval" -- eval --bogus "$WORK/p.py" "$WORK/c.py"
check "bad device" 2 '"error":"usage"' "--device must be cuda or cpu" -- eval "$WORK/p.py" "$WORK/c.py" --device tpu --json
check "one file only" 2 "" "give exactly a problem file and a candidate file" -- eval "$WORK/p.py"
check "no gpu: suggests --device cpu" 2 "" "add --device cpu" -- eval "$WORK/p.py" "$WORK/c.py"
check "missing value json" 2 '"error":"usage"' "--gpu needs a value" -- eval "$WORK/p.py" "$WORK/c.py" --json --gpu
check "bad --device-queues" 2 "" "--device-queues needs a number, 1 to 32" -- eval "$WORK/p.py" "$WORK/c.py" --device-queues 33
check "bad --timing-processes" 2 "" "--timing-processes needs a number, 1 to 8" -- eval "$WORK/p.py" "$WORK/c.py" --timing-processes 9
# --json on every command: exactly one object on stdout, an error object on failure.
# check_one_object NAME EXPECTED_STATUS KIND -- kagent arguments
check_one_object() {
	name=$1 expected=$2 kind=$3
	shift 3
	check "$name" "$expected" "\"error\":\"$kind\"" "" "$@"
	if one_object "$WORK/out" && [ "$(wc -l < "$WORK/out")" -eq 1 ]; then ok "$name: exactly one JSON object"; else not_ok "$name: exactly one JSON object" "$(cat "$WORK/out")"; fi
}
check_one_object "gpu json, no gpu" 2 no_gpu -- gpu --json
check_one_object "gpu json, bad flag" 2 usage -- gpu --json --bogus
check_one_object "optimize json, no problem" 2 usage -- optimize --json
check_one_object "optimize json, bad flag" 2 usage -- optimize "$WORK/p.py" --json --bogus
(unset KAGENT_CONFIG OPENAI_API_KEY ANTHROPIC_API_KEY; cd "$WORK" &&
	check_one_object "optimize json, no gpu" 2 no_gpu -- optimize "$WORK/p.py" --json --model m --base-url http://127.0.0.1:9/v1) > "$WORK/tap"
cat "$WORK/tap"
count=$((count + 2)); grep -q "^not ok" "$WORK/tap" && failed=$((failed + 1))
check "optimize, no gpu: suggests --device cpu" 2 "" "add --device cpu" -- optimize "$WORK/p.py" --model m --base-url http://127.0.0.1:9/v1

export FAKE_WORKER_RESULT="$SOURCE/tests/fixtures/verdict/correct_cpu.json"
check "cpu correct" 0 '"status": "correct"' "" -- eval "$WORK/p.py" "$WORK/c.py" --device cpu --json --seed 7
if [ "$(json_field "$WORK/out" 'v["candidate"]["backend"], v["timing"]["speedup_vs_eager"], v["timing"]["baselines_cached"]')" = "triton 2.0 False" ]; then
	ok "cpu correct: backend, speedup, fresh baselines"
else
	not_ok "cpu correct: fields" "$(cat "$WORK/out")"
fi
check "cpu correct again: baselines from the cache" 0 '"baselines_cached": true' "" -- eval "$WORK/p.py" "$WORK/c.py" --device cpu --json
export FAKE_WORKER_RESULT="$SOURCE/tests/fixtures/verdict/incorrect_cpu.json"
check "cpu incorrect" 1 '"check": "output_mismatch"' "" -- eval "$WORK/p.py" "$WORK/c.py" --device cpu --json --no-cache
check "cpu incorrect text" 1 "incorrect: output\[0\] mismatches in trial 2" "" -- eval "$WORK/p.py" "$WORK/c.py" --device cpu --no-cache

# Evidence bundles: written by eval --evidence, re-run by verify; a bad bundle exits 2.
export FAKE_WORKER_RESULT="$SOURCE/tests/fixtures/verdict/correct_cpu.json"
check "eval --evidence" 0 '"status": "correct"' "" -- eval "$WORK/p.py" "$WORK/c.py" --device cpu --json --seed 7 --evidence "$WORK/bundle"
if [ "$(json_field "$WORK/bundle/evidence.json" 'v["schema"], v["seeds"]["base"], v["options"]["device"]')" = "kagent.evidence/1 7 cpu" ] && cmp -s "$WORK/c.py" "$WORK/bundle/candidate.py"; then
	ok "eval --evidence: the bundle records seeds, device and the files"
else
	not_ok "eval --evidence: bundle" "$(ls "$WORK/bundle"; cat "$WORK/bundle/evidence.json")"
fi
check "verify the bundle" 0 "verified: the status matches" "" -- verify "$WORK/bundle"
check "verify a missing bundle" 2 '"error":"bundle"' "not a usable evidence bundle: cannot open $WORK/nothing/evidence.json" -- verify "$WORK/nothing" --json
mkdir "$WORK/garbage" && echo '{"schema": "other"}' > "$WORK/garbage/evidence.json"
check "verify a garbage bundle" 2 "" "is not a kagent.evidence/1 object" -- verify "$WORK/garbage"
check "verify without a folder" 2 "" "give exactly one evidence folder" -- verify
check "verify --interval-floor" 0 '"interval_floor": 0.5' "" -- verify "$WORK/bundle" --json --interval-floor 50
check "verify a bad --interval-floor" 2 "" "--interval-floor needs a percentage, 0 to 100" -- verify "$WORK/bundle" --interval-floor 120
check "replay a bad --interval-floor" 2 "" "--interval-floor needs a percentage, 0 to 100" -- replay "$WORK/none.jsonl" --interval-floor two
printf '# edited\n' >> "$WORK/bundle/problem.py"
check "verify an edited bundle" 2 "" "problem.py does not match its sha256" -- verify "$WORK/bundle"

# `kagent worker` refuses a socket path that would go wrong, saying what to do instead.
check "worker on a folder" 2 "" "is a folder; name the socket inside it" -- worker --socket "$WORK"
check "worker in a missing folder" 2 "" "no folder $WORK/missing/dir for the socket" -- worker --socket "$WORK/missing/dir/w.sock"
if [ -e "$WORK/missing" ]; then not_ok "worker in a missing folder: not created"; else ok "worker in a missing folder: not created"; fi
check "worker on a file" 2 "" "exists and is not a socket" -- worker --socket "$WORK/p.py"
check "worker whose parent is gone" 1 "" "process 1, which started it, is gone" -- worker --socket "$WORK/gone.sock" --parent 1

# A warm worker on a socket, through `kagent worker`.
export FAKE_WORKER_RESULT="$SOURCE/tests/fixtures/verdict/correct_cpu.json"
mkdir "$WORK/run"
"$KAGENT" worker --socket "$WORK/run/w.sock" 2> "$WORK/worker.err" &
WORKER_PID=$!
tries=0
while [ ! -S "$WORK/run/w.sock" ] && [ $tries -lt 100 ]; do sleep 0.05; tries=$((tries + 1)); done
check "eval through kagent worker" 0 '"status": "correct"' "" -- eval "$WORK/p.py" "$WORK/c.py" --device cpu --json --worker "$WORK/run/w.sock"
check "a second worker on a live socket" 2 "" "a worker already serves on $WORK/run/w.sock" -- worker --socket "$WORK/run/w.sock"
kill $WORKER_PID
# --gpu N counts the devices the worker's parent sees: under a CUDA_VISIBLE_DEVICES of its own
# (a Slurm job's) it is that list's Nth entry. A runner that only writes down what it saw.
mkdir -p "$WORK/env_runner/kagent_runner"
: > "$WORK/env_runner/kagent_runner/__init__.py"
# It is still told which GPU it serves (KAGENT_WORKER_GPU), as requests name that GPU.
printf 'import os\nopen(os.environ["ENV_OUT"], "w").write(os.environ.get("CUDA_VISIBLE_DEVICES", "unset") + " " + os.environ.get("KAGENT_WORKER_GPU", "unset"))\n' > "$WORK/env_runner/kagent_runner/worker.py"
CUDA_VISIBLE_DEVICES=4,6 ENV_OUT="$WORK/visible" KAGENT_RUNNER_DIR="$WORK/env_runner" "$KAGENT" worker --socket "$WORK/env1.sock" --gpu 1 2>/dev/null
if [ "$(cat "$WORK/visible" 2>/dev/null)" = "6 1" ]; then ok "worker --gpu 1 under CUDA_VISIBLE_DEVICES=4,6 sees GPU 6 and serves GPU 1"; else not_ok "worker --gpu 1 under CUDA_VISIBLE_DEVICES=4,6 sees GPU 6 and serves GPU 1" "$(cat "$WORK/visible" 2>&1)"; fi
env -u CUDA_VISIBLE_DEVICES ENV_OUT="$WORK/visible" KAGENT_RUNNER_DIR="$WORK/env_runner" "$KAGENT" worker --socket "$WORK/env2.sock" --gpu 1 2>/dev/null
if [ "$(cat "$WORK/visible" 2>/dev/null)" = "1 1" ]; then ok "worker --gpu 1 alone sees GPU 1 and serves GPU 1"; else not_ok "worker --gpu 1 alone sees GPU 1 and serves GPU 1" "$(cat "$WORK/visible" 2>&1)"; fi
[ "$failed" -eq 0 ]
