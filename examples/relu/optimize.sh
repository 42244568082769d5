#!/usr/bin/env bash
# kagent optimize on the example problem. With a model endpoint configured (a kagent.yaml,
# KAGENT_CONFIG, or OPENAI_API_KEY / ANTHROPIC_API_KEY: see docs/user-guide.md), it runs the
# real loop on the GPU. Without one, it replays a recorded conversation
# (recorded_conversation.json, served by tests/fixtures/llm_server.py) against the real
# evaluator on the CPU, so the whole loop (tool calls, verdicts, git history, trace, final
# check on unseen seeds) can be watched on any machine.
#
# Reading the result: the same variant is timed three times, so it shows three speedups (for
# example 0.85x, 1.00x, 0.86x): "evaluate" when the model tried it, "confirm" on unseen seeds
# before it became the best, and "final" on other unseen seeds in a fresh worker process. The
# differences are timing noise, which is large on a CPU; on a GPU they agree more closely.
set -euo pipefail
cd "$(dirname "$0")/../.."
output=${KAGENT_OUTPUT:-kagent-runs}
if [ -n "${KAGENT_CONFIG:-}" ] || [ -f kagent.yaml ] || [ -n "${OPENAI_API_KEY:-}" ] ||
	[ -n "${ANTHROPIC_API_KEY:-}" ]; then
	exec build/kagent optimize examples/relu/problem.py --output "$output" "$@"
fi
echo "optimize.sh: no model endpoint configured; replaying a recorded conversation on the CPU"
log=$(mktemp -d)
coproc server { exec python3 tests/fixtures/llm_server.py \
	--script examples/relu/recorded_conversation.json --log "$log/requests.jsonl" --port 0; }
trap 'kill "$server_PID" 2>/dev/null; rm -rf "$log"' EXIT
read -r _ port <&"${server[0]}"
build/kagent optimize examples/relu/problem.py --device cpu --target 0 --api chat_completions \
	--base-url "http://127.0.0.1:$port/v1" --model recorded --output "$output" "$@"
