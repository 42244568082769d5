# TAP helpers the CLI tests source: ok, not_ok and skip count and print results, and check runs
# kagent ($KAGENT) with its output in $WORK and matches the exit status, stdout and stderr.
count=0
failed=0
ok() { count=$((count + 1)); echo "ok $count - $1"; }
not_ok() { count=$((count + 1)); failed=$((failed + 1)); echo "not ok $count - $1"; shift; for line in "$@"; do echo "# $line"; done; }
skip() { count=$((count + 1)); echo "ok $count - $1 # SKIP $2"; }
# check NAME EXPECTED_STATUS STDOUT_PATTERN STDERR_PATTERN -- kagent arguments
check() {
	name=$1 expected=$2 out_pattern=$3 err_pattern=$4
	shift 5
	"$KAGENT" "$@" > "$WORK/out" 2> "$WORK/err"
	status=$?
	if [ "$status" -ne "$expected" ]; then
		not_ok "$name" "exit $status, expected $expected" "$(cat "$WORK/out" "$WORK/err")"
	elif [ -n "$out_pattern" ] && ! grep -q -- "$out_pattern" "$WORK/out"; then
		not_ok "$name" "stdout lacks $out_pattern" "$(cat "$WORK/out")"
	elif [ -n "$err_pattern" ] && ! grep -q -- "$err_pattern" "$WORK/err"; then
		not_ok "$name" "stderr lacks $err_pattern" "$(cat "$WORK/err")"
	else
		ok "$name"
	fi
}
