#!/bin/sh
# Black-box tests of `kagent trace`: a whole small run rendered, verbose and as JSON, a trace cut
# by a killed writer, files that are not traces (tests/fixtures/traces), and --follow on a file
# being written, cut lines included. TAP output.
set -u
KAGENT=${KAGENT:?path to the kagent binary}
SOURCE=${KAGENT_SOURCE_DIR:?source folder}
TRACES="$SOURCE/tests/fixtures/traces"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kagent-trace-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

. "$(dirname "$0")/tap.sh"
# check_line NAME EXPECTED_STATUS STDOUT_LINE STDERR_PATTERN -- kagent arguments
# STDOUT_LINE must be a whole line of stdout (fixed string); STDERR_PATTERN a grep pattern.
check_line() {
	name=$1 expected=$2 out_line=$3 err_pattern=$4
	shift 5
	"$KAGENT" "$@" > "$WORK/out" 2> "$WORK/err"
	status=$?
	if [ "$status" -ne "$expected" ]; then
		not_ok "$name" "exit $status, expected $expected" "$(cat "$WORK/out" "$WORK/err")"
	elif [ -n "$out_line" ] && ! grep -q -x -F -- "$out_line" "$WORK/out"; then
		not_ok "$name" "stdout lacks the line: $out_line" "$(cat "$WORK/out")"
	elif [ -n "$err_pattern" ] && ! grep -q -- "$err_pattern" "$WORK/err"; then
		not_ok "$name" "stderr lacks $err_pattern" "$(cat "$WORK/err")"
	elif [ -z "$err_pattern" ] && [ -s "$WORK/err" ]; then
		not_ok "$name" "unexpected stderr" "$(cat "$WORK/err")"
	else
		ok "$name"
	fi
}
# expect_lines NAME FILE LINE...: each LINE is a whole line of FILE.
expect_lines() {
	name=$1 file=$2
	shift 2
	for line in "$@"; do
		if ! grep -q -x -F -- "$line" "$file"; then
			not_ok "$name" "missing line: $line" "$(cat "$file")"
			return
		fi
	done
	ok "$name"
}

echo "1..27"
check_line "run: exit 0, the run line" 0 \
	"run 20261122-061502-3f2a: relu (problem.py), model gpt-5 via chat_completions, target 1.50x vs best of eager and compile" \
	"" -- trace "$TRACES/run.jsonl"
expect_lines "run: one line per event" "$WORK/out" \
	"turn 1: 1.2k in / 567 out tokens, \$0.0123, 12.3 s; calls evaluate" \
	"turn 1: call evaluate {source: 5 lines}" \
	"turn 1: evaluate v1 -> correct, 1.23x eager, 0.98x compile (0.1234 ms)" \
	"turn 1: commit v1 3f2a1b0 on runs/20261122-061502-3f2a" \
	"turn 1: best v1 1.23x (was none)" \
	"turn 1: evaluate returned in 25.6 s: v1: correct, 1.23x faster than eager, 0.98x torch.compile..." \
	"turn 1 done: best 1.23x (v1); budget: turns 1/40, tokens 1.8k/100k, \$0.01/\$5.00, 38s/60m, gpu 1.9s" \
	"turn 2: retry 1 after 429 rate limited: waiting 2.0 s" \
	"turn 2: best v2 2.10x (was 1.23x)" \
	"stop: target reached (v2 2.10x)" \
	"confirm v2 -> correct, 2.05x eager, 1.66x compile (0.0741 ms)" \
	"final: v2 confirmed on unseen seeds, 2.05x; best kernel: kagent-runs/relu/20261122-061502-3f2a/best.py"
if grep -q -e "Write a faster kernel" -e "request" -e "ReLU is memory bound" -e "candidate 0.1234 ms" "$WORK/out"; then
	not_ok "run: messages, requests, streams and the model's text only with --verbose" "$(cat "$WORK/out")"
else
	ok "run: messages, requests, streams and the model's text only with --verbose"
fi
if grep -q "$(printf '\033')" "$WORK/out"; then not_ok "run: no escape sequences into a pipe"; else ok "run: no escape sequences into a pipe"; fi

check_line "verbose" 0 "    ReLU is memory bound." "" -- trace --verbose "$TRACES/run.jsonl"
expect_lines "verbose: message, request, text, whole tool result" "$WORK/out" \
	"turn 1: message to the model:" \
	"  Write a faster kernel for this module:" \
	"turn 1: request, attempt 1 to https://api.openai.com/v1/chat/completions, 0.1 kB" \
	"    I will write a vectorized Triton kernel." \
	"  candidate 0.1234 ms, eager 0.1518 ms"

check_line "json" 0 "" "" -- trace "$TRACES/run.jsonl" --json
if python3 - "$TRACES/run.jsonl" "$WORK/out" <<'PY'
import json, sys
expected = [json.loads(line) for line in open(sys.argv[1])]
lines = open(sys.argv[2]).read().splitlines()
got = [json.loads(line) for line in lines]
assert got == expected, "records differ"
assert [list(r) for r in got] == [list(r) for r in expected], "key order differs"
PY
then ok "json: every record as written, one per line, keys in order"; else not_ok "json: every record as written"; fi

check_line "cut last line: exit 0 and a note" 0 "stop: target reached (v2 2.10x)" \
	"truncated.jsonl: trace ends in a cut line: the run was killed while writing" -- trace "$TRACES/truncated.jsonl"
if grep -q "^final:" "$WORK/out"; then not_ok "cut last line: the cut record is skipped" "$(cat "$WORK/out")"; else ok "cut last line: the cut record is skipped"; fi
check_line "cut last line, json" 0 "" "trace ends in a cut line" -- trace --json "$TRACES/truncated.jsonl"
if [ "$(wc -l < "$WORK/out")" -eq 22 ]; then ok "cut last line, json: 22 whole records"; else not_ok "cut last line, json: 22 whole records" "$(wc -l < "$WORK/out")"; fi

check_line "garbage file" 2 "" "garbage.jsonl:1: not a JSON object" -- trace "$TRACES/garbage.jsonl"
head -n 3 "$TRACES/run.jsonl" > "$WORK/middle.jsonl"
echo "oops, not JSON" >> "$WORK/middle.jsonl"
sed -n 4,5p "$TRACES/run.jsonl" >> "$WORK/middle.jsonl"
check_line "bad middle line, json: nothing printed" 2 "" "middle.jsonl:4: not a JSON object" -- trace --json "$WORK/middle.jsonl"
# No record reaches stdout, only the one error object every --json failure prints.
if [ "$(wc -l < "$WORK/out")" -eq 1 ] && grep -q '"error":"trace"' "$WORK/out"; then ok "bad middle line, json: no record, one error object"; else not_ok "bad middle line, json: no record, one error object" "$(cat "$WORK/out")"; fi
check_line "missing file" 2 "" "cannot open the trace $WORK/none.jsonl: No such file or directory" -- trace "$WORK/none.jsonl"
check_line "no file" 2 "" "usage: kagent trace FILE" -- trace
: > "$WORK/empty.jsonl"
check_line "empty file" 2 "" "empty.jsonl holds no records" -- trace "$WORK/empty.jsonl"
check_line "empty file, json" 2 "" "holds no records" -- trace --json "$WORK/empty.jsonl"
if [ "$(wc -l < "$WORK/out")" -eq 1 ] && grep -q '"error":"empty"' "$WORK/out"; then ok "empty file, json: one error object"; else not_ok "empty file, json: one error object" "$(cat "$WORK/out")"; fi

# --follow: a finished trace shows as without it, and the final record ends the command.
"$KAGENT" trace "$TRACES/run.jsonl" > "$WORK/whole" 2>&1
check_line "follow a finished trace: exit 0 at its final record" 0 "" "" -- trace --follow "$TRACES/run.jsonl"
if cmp -s "$WORK/whole" "$WORK/out"; then ok "follow a finished trace: the same lines"; else not_ok "follow a finished trace: the same lines" "$(diff "$WORK/whole" "$WORK/out")"; fi

# A file written while it is followed: lines arrive in pieces, one of them cut in two writes
# 0.5 s apart; the follower shows each record once, in order, and stops at the final one.
head -n 4 "$TRACES/run.jsonl" > "$WORK/growing.jsonl"
"$KAGENT" trace --follow "$WORK/growing.jsonl" > "$WORK/followed" 2> "$WORK/followed.err" &
follower=$!
"$KAGENT" trace --json --follow "$WORK/growing.jsonl" > "$WORK/followed.json" 2>&1 &
json_follower=$!
sleep 0.5
line=$(sed -n 5p "$TRACES/run.jsonl")
printf '%s' "$(printf '%s' "$line" | cut -c1-40)" >> "$WORK/growing.jsonl"
sleep 0.5
printf '%s\n' "$(printf '%s' "$line" | cut -c41-)" >> "$WORK/growing.jsonl"
sed -n 6,15p "$TRACES/run.jsonl" >> "$WORK/growing.jsonl"
sleep 0.5
sed -n '16,$p' "$TRACES/run.jsonl" >> "$WORK/growing.jsonl"
wait_for() { # wait_for PID SECONDS: its exit status, or 124 after killing it
	waited=0
	while kill -0 "$1" 2> /dev/null && [ "$waited" -lt "$(($2 * 10))" ]; do sleep 0.1; waited=$((waited + 1)); done
	if kill -0 "$1" 2> /dev/null; then kill "$1"; wait "$1"; return 124; fi
	wait "$1"
}
wait_for "$follower" 10
status=$?
if [ "$status" -eq 0 ] && cmp -s "$WORK/whole" "$WORK/followed" && [ ! -s "$WORK/followed.err" ]; then
	ok "follow a file being written: every record once, ended by the final one"
else
	not_ok "follow a file being written: every record once, ended by the final one" "exit $status" "$(diff "$WORK/whole" "$WORK/followed")" "$(cat "$WORK/followed.err")"
fi
wait_for "$json_follower" 10
status=$?
if [ "$status" -eq 0 ] && cmp -s "$TRACES/run.jsonl" "$WORK/followed.json"; then
	ok "follow --json: the lines as written, the cut one whole once completed"
else
	not_ok "follow --json: the lines as written, the cut one whole once completed" "exit $status" "$(diff "$TRACES/run.jsonl" "$WORK/followed.json")"
fi

# No final record: Ctrl-C (SIGINT) detaches, exit 0, what was there shown.
cp "$TRACES/truncated.jsonl" "$WORK/unfinished.jsonl"
"$KAGENT" trace --follow "$WORK/unfinished.jsonl" > "$WORK/out" 2> "$WORK/err" &
follower=$!
sleep 1
kill -INT "$follower"
wait_for "$follower" 5
status=$?
if [ "$status" -eq 0 ] && grep -q -x -F "stop: target reached (v2 2.10x)" "$WORK/out"; then
	ok "follow without a final record: Ctrl-C ends it, exit 0"
else
	not_ok "follow without a final record: Ctrl-C ends it, exit 0" "exit $status" "$(cat "$WORK/out" "$WORK/err")"
fi

# The file replaced by a shorter one: an error, not nonsense.
cp "$TRACES/truncated.jsonl" "$WORK/replaced.jsonl"
"$KAGENT" trace --follow "$WORK/replaced.jsonl" > "$WORK/out" 2> "$WORK/err" &
follower=$!
sleep 0.6
head -n 2 "$TRACES/run.jsonl" > "$WORK/replaced.jsonl"
wait_for "$follower" 5
status=$?
if [ "$status" -eq 2 ] && grep -q "the trace was replaced" "$WORK/err"; then
	ok "follow a file replaced by a shorter one: exit 2, said why"
else
	not_ok "follow a file replaced by a shorter one: exit 2, said why" "exit $status" "$(cat "$WORK/err")"
fi
check_line "follow a missing file" 2 "" "cannot open the trace" -- trace --follow "$WORK/none.jsonl"
[ "$failed" -eq 0 ]
