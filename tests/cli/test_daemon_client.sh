#!/bin/sh
# Black-box tests of the commands that talk to kagentd (batch, status, cancel, report, watch): usage
# errors, no daemon, and the answers of a stand-in daemon on a private socket
# (tests/fixtures/fake_kagentd.py, which logs what it was sent). TAP output.
set -u
KAGENT=${KAGENT:?path to the kagent binary}
SOURCE=${KAGENT_SOURCE_DIR:?source folder}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kagent-daemon-client-XXXXXX")
FAKE_PID=
trap '[ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
unset KAGENT_SOCKET KAGENT_DAEMON_SOCKET KAGENT_TOKEN
export KAGENT_RUNNER_DIR="$SOURCE/sandbox/runner" XDG_RUNTIME_DIR="$WORK/runtime"
# The runner's Python: the project's .venv where there is one, as kagent finds it itself.
if [ -x "$SOURCE/.venv/bin/python3" ]; then RUNNER_PYTHON="$SOURCE/.venv/bin/python3"; else RUNNER_PYTHON=python3; fi
export KAGENT_PYTHON="$RUNNER_PYTHON"

. "$(dirname "$0")/tap.sh"
one_object() { python3 -c "import json,sys; t=open(sys.argv[1]).read(); assert t.count('\n') == 1; json.loads(t)" "$1"; }
# check_object NAME EXPECTED_STATUS KIND -- kagent arguments: an error object of KIND, alone.
check_object() {
	name=$1 expected=$2 kind=$3
	shift 3
	check "$name" "$expected" "\"error\":\"$kind\"" "" "$@"
	if one_object "$WORK/out"; then ok "$name: exactly one JSON object"; else not_ok "$name: exactly one JSON object" "$(cat "$WORK/out")"; fi
}
# last_request EXPRESSION: a field of the last request the fake daemon logged (r is the request).
last_request() { python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print($1)" "$WORK/requests"; }

DONE=b-20250101-000000-done0001 RUNNING=b-20250101-000000-runs0002
mkdir -p "$WORK/kb/level1" "$WORK/kb/level2" "$WORK/runtime"
printf 'class Model: pass\n' > "$WORK/kb/level1/19_ReLU.py"
cp "$WORK/kb/level1/19_ReLU.py" "$WORK/kb/level2/1_Conv.py"

echo "1..74"
for command in batch status cancel report watch; do
	check "$command --help" 0 "^usage: kagent $command" "" -- "$command" --help
done
check "batch --help: optimize's flags, the daemon's defaults" 0 "--max-turns N .*model turns; 0: no limit (default: kagentd's config)" "" -- batch --help

# Usage errors: exit 2, where to read more, and nothing sent (no daemon is needed to see them).
check "batch with nothing" 2 "" "give a folder of problems, or problem files" -- batch
check "batch: an unknown flag" 2 "" "try 'kagent batch --help'" -- batch "$WORK/kb" --bogus
check_object "batch --level not a number" 2 usage -- batch "$WORK/kb" --level one --json
check "batch --level with files" 2 "" "--level and --filter choose inside a folder" -- batch "$WORK/kb/level1/19_ReLU.py" --level 1
check "batch: a folder and a file" 2 "" "give one folder of problems, or problem files, not both" -- batch "$WORK/kb" "$WORK/kb/level1/19_ReLU.py"
check "batch: a missing file" 2 "" "cannot read $WORK/nope.py" -- batch "$WORK/nope.py"
check "batch: a bad budget, checked as optimize checks it" 2 "" "--max-turns: budget.max_turns" -- batch "$WORK/kb" --max-turns many
check "status: two ids" 2 "" "give at most one batch or session id" -- status a b
check "cancel: no id" 2 "" "try 'kagent cancel --help'" -- cancel
check_object "report: two formats" 2 usage -- report "$DONE" --csv --json
check "watch: no id" 2 "" "give exactly one id" -- watch
check "report: not a batch id" 2 "" "give one batch id (b-...)" -- report run-1

# No daemon: exit 2 and how to start one, for every command and every way of naming the socket.
check "status, no daemon (--socket)" 2 "" "no kagentd at $WORK/none.sock: start it with \`kagent daemon\`" -- status --socket "$WORK/none.sock"
# (Set and unset around check: an assignment before a function call may outlive it in sh.)
export KAGENT_SOCKET="$WORK/env.sock"
check "cancel, no daemon (\$KAGENT_SOCKET)" 2 "" "no kagentd at $WORK/env.sock" -- cancel "$DONE"
unset KAGENT_SOCKET
export KAGENT_DAEMON_SOCKET="$WORK/daemon.sock"
check "report, no daemon (\$KAGENT_DAEMON_SOCKET)" 2 "" "no kagentd at $WORK/daemon.sock" -- report "$DONE"
export KAGENT_SOCKET="$WORK/env.sock"
check "--socket over \$KAGENT_SOCKET over \$KAGENT_DAEMON_SOCKET" 2 "" "no kagentd at $WORK/flag.sock" -- status --socket "$WORK/flag.sock"
check "\$KAGENT_SOCKET over \$KAGENT_DAEMON_SOCKET" 2 "" "no kagentd at $WORK/env.sock" -- status
unset KAGENT_SOCKET KAGENT_DAEMON_SOCKET
check "batch, no daemon (the default socket)" 2 "" "no kagentd at $WORK/runtime/kagent/kagentd.sock" -- batch "$WORK/kb"
check_object "status --json, no daemon" 2 no_daemon -- status --json --socket "$WORK/none.sock"
check "no daemon over TCP" 2 "" "no kagentd at http://127.0.0.1:9" -- status --socket http://127.0.0.1:9
check "watch, no daemon" 2 "" "no kagentd at $WORK/none.sock" -- watch run-1 --socket "$WORK/none.sock"
check_object "a token file that cannot be read" 2 token -- status --socket http://127.0.0.1:9 --token-file "$WORK/no-token" --json

# The stand-in daemon.
python3 "$SOURCE/tests/fixtures/fake_kagentd.py" "$WORK/kagentd.sock" "$WORK/requests" 2> "$WORK/fake.err" &
FAKE_PID=$!
tries=0
while [ ! -e "$WORK/kagentd.sock.ready" ] && [ $tries -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
export KAGENT_SOCKET="$WORK/kagentd.sock"

(cd "$WORK" && check "batch DIR --level 1 --max-turns 2" 0 "^batch b-20250101-000000-new00003: 1 problem queued" "" -- batch kb --level 1 --max-turns 2) > "$WORK/tap"
cat "$WORK/tap"; count=$((count + 1)); grep -q "^not ok" "$WORK/tap" && failed=$((failed + 1))
got=$(last_request 'r["method"], r["path"], r["body"]')
expected="POST /v1/batches {'folder': '$WORK/kb', 'level': 1, 'settings': {'max_turns': 2}}"
[ "$got" = "$expected" ] && ok "batch: the absolute folder, the level and the settings POSTed" || not_ok "batch: what was POSTed" "got      $got" "expected $expected"
check "batch files --json, typed settings" 0 '^{"batch": *"b-20250101-000000-new00003", *"sessions": *2}$' "" -- batch "$WORK/kb/level1/19_ReLU.py" "$WORK/kb/level2/1_Conv.py" --json --target 1.5 --against compile
got=$(last_request 'r["body"]')
expected="{'problems': ['$WORK/kb/level1/19_ReLU.py', '$WORK/kb/level2/1_Conv.py'], 'settings': {'target': 1.5, 'against': 'compile'}}"
[ "$got" = "$expected" ] && ok "batch files: absolute paths, typed settings" || not_ok "batch files: what was POSTed" "got      $got" "expected $expected"
check "batch: the daemon's 400" 1 "" "no problem files under" -- batch "$WORK/kb" --socket "$WORK/kagentd.sock" --filter 'x*'
requests=$(wc -l < "$WORK/requests")
check "batch: a bad --api is refused before sending" 2 "" "--api: provider.api" -- batch "$WORK/kb" --api soap
[ "$(wc -l < "$WORK/requests")" -eq "$requests" ] && ok "batch: nothing sent after a usage error" || not_ok "batch: nothing sent after a usage error"

check "status: health and batches" 0 "^b-20250101-000000-runs0002 *running .*1 queued, 1 running" "" -- status
grep -q "^kagentd 0.1.0-fake: ok, device cuda, GPUs 0,1, sessions: 1 running, 1 queued" "$WORK/out" && ok "status: the health line" || not_ok "status: the health line" "$(cat "$WORK/out")"
check "status BATCH: one line per session" 0 "^run-done-3 *1_Conv2D_ReLU_BiasAdd *done *1.25x" "" -- status "$DONE"
grep -q "^run-done-4 *7_Matmul_GELU *failed *-$" "$WORK/out" && ok "status BATCH: a failed session, no speedup" || not_ok "status BATCH: failed session" "$(cat "$WORK/out")"
check "status SESSION: live numbers" 0 "^  tokens   4567" "" -- status run-live-1
check "status SESSION --json" 0 '"live":' "" -- status run-live-1 --json
check "status: an unknown batch" 1 "" "kagent status: no batch b-nope" -- status b-nope
check_object "status --json: an unknown session" 1 not_found -- status run-nope --json

check "cancel a finished batch" 1 "" "batch $DONE already finished" -- cancel "$DONE"
check_object "cancel --json a finished session" 1 conflict -- cancel run-done-1 --json
check "cancel a running batch" 0 "^batch $RUNNING: cancelled; stopping 1 running session at its next safe point: run-live-1" "" -- cancel "$RUNNING"
[ "$(last_request 'r["method"], r["path"]')" = "DELETE /v1/batches/$RUNNING" ] && ok "cancel: DELETE the batch" || not_ok "cancel: DELETE the batch" "$(tail -n 1 "$WORK/requests")"

check "report: the rows and the summary" 0 "^all  *4 3 (75%) *2 50%/50%/25%" "" -- report "$DONE"
grep -q "^1_Conv2D_ReLU_BiasAdd  *2 correct  *1.25x  *0.90x  *yes" "$WORK/out" && ok "report: a row" || not_ok "report: a row" "$(cat "$WORK/out")"
check "report --csv" 0 "^problem,level,session,state,status," "" -- report "$DONE" --csv
[ "$(wc -l < "$WORK/out")" -eq 5 ] && grep -q "^7_Matmul_GELU,2,run-done-4,failed,incorrect,false,false,,," "$WORK/out" && ok "report --csv: the header and one line per row" || not_ok "report --csv: lines" "$(cat "$WORK/out")"
check "report --summary-csv" 0 "^all,4,3,0.75,2," "" -- report "$DONE" --summary-csv
check "report --json" 0 '"summary"' "" -- report "$DONE" --json
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['batch'] == '$DONE' and len(r['rows']) == 4 and len(r['summary']['levels']) == 2" "$WORK/out" && ok "report --json: the object" || not_ok "report --json: the object" "$(cat "$WORK/out")"

# --plot: a PNG when the runner's Python has matplotlib; without it, say so and exit 2.
if "$RUNNER_PYTHON" -c "import matplotlib" 2> /dev/null; then
	check "report --plot" 0 "^batch $DONE" "drawn in $WORK/speedups.png" -- report "$DONE" --plot "$WORK/speedups.png"
	[ "$(od -A n -t x1 -N 8 "$WORK/speedups.png" | tr -d ' ')" = "89504e470d0a1a0a" ] && ok "report --plot: a PNG" || not_ok "report --plot: a PNG" "$(od -c -N 16 "$WORK/speedups.png")"
else
	skip "report --plot" "no matplotlib in $RUNNER_PYTHON"
	skip "report --plot: a PNG" "no matplotlib in $RUNNER_PYTHON"
fi
# python3 -S sees no site-packages, so no matplotlib whatever is installed.
printf '#!/bin/sh\nexec python3 -S "$@"\n' > "$WORK/bare-python" && chmod +x "$WORK/bare-python"
export KAGENT_PYTHON="$WORK/bare-python"
check_object "report --plot without matplotlib" 2 plot -- report "$DONE" --json --plot "$WORK/no.png"
export KAGENT_PYTHON="$RUNNER_PYTHON"
grep -q "needs matplotlib in the runner's Python ($WORK/bare-python)" "$WORK/err" && ok "report --plot without matplotlib: what to install" || not_ok "report --plot without matplotlib: message" "$(cat "$WORK/err")"

# watch: a session's stream rendered as `kagent trace` renders the same records; a batch's
# state changes, one line each (not a terminal), until the batch ends.
"$KAGENT" trace "$SOURCE/tests/fixtures/traces/run.jsonl" > "$WORK/traced"
check "watch SESSION: exit 0 when it ends" 0 "" "session run-live-1 ended: done" -- watch run-live-1
if cmp -s "$WORK/traced" "$WORK/out"; then ok "watch SESSION: the lines kagent trace prints"; else not_ok "watch SESSION: the lines kagent trace prints" "$(diff "$WORK/traced" "$WORK/out")"; fi
[ "$(last_request 'r["method"], r["path"]')" = "GET /v1/sessions/run-live-1/events" ] && ok "watch SESSION: GET its events" || not_ok "watch SESSION: GET its events" "$(tail -n 1 "$WORK/requests")"
check "watch --json SESSION" 0 "" "" -- watch --json run-live-1
{ cat "$SOURCE/tests/fixtures/traces/run.jsonl"; echo '{"state":"done"}'; } > "$WORK/expected.json"
if python3 -c "import json,sys; a=[json.loads(l) for l in open(sys.argv[1])]; b=[json.loads(l) for l in open(sys.argv[2])]; assert a == b" "$WORK/expected.json" "$WORK/out"; then ok "watch --json SESSION: the records, then the end"; else not_ok "watch --json SESSION: the records, then the end" "$(head -c 600 "$WORK/out")"; fi
check "watch BATCH: exit 0 when it is done" 0 "^batch $RUNNING done: 0 queued, 0 running, 1 done, 0 failed, 1 cancelled$" "batch $RUNNING ended: done" -- watch "$RUNNING"
grep -q "^run-live-1 .* done .* turn 3 .* best v2 1.50x$" "$WORK/out" && ok "watch BATCH: a session's line" || not_ok "watch BATCH: a session's line" "$(cat "$WORK/out")"
[ "$(last_request 'r["path"]')" = "/v1/events?batch=$RUNNING" ] && ok "watch BATCH: GET /v1/events?batch=ID" || not_ok "watch BATCH: the path" "$(tail -n 1 "$WORK/requests")"
check "watch: an unknown session" 1 "" "kagent watch: no such path: /v1/sessions/run-nope/events" -- watch run-nope

[ "$failed" -eq 0 ]
