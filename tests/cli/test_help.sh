#!/bin/sh
# Black-box tests of what kagent says about itself, all read from the one command table: `kagent
# CMD --help` and `kagent help CMD`, usage errors, the bash and zsh completions and the man page
# that meson generates and installs. TAP output.
set -u
KAGENT=${KAGENT:?path to the kagent binary}
BASH_COMPLETION=${KAGENT_BASH_COMPLETION:?the generated bash completion}
ZSH_COMPLETION=${KAGENT_ZSH_COMPLETION:?the generated zsh completion}
MAN_PAGE=${KAGENT_MAN_PAGE:?the generated man page}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kagent-help-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

. "$(dirname "$0")/tap.sh"

# The commands, as `kagent help` lists them (help and version are the binary's own).
"$KAGENT" help > "$WORK/list"
commands=$(sed -n 's/^  \([a-z]*\) .*/\1/p' "$WORK/list" | grep -v -x -e help -e version)
echo "1..$((7 * $(echo "$commands" | wc -l) + 16))"

for command in $commands; do
	check "$command --help: usage and options on stdout" 0 "^usage: kagent $command" "" -- "$command" --help
	if [ -s "$WORK/err" ]; then not_ok "$command --help: nothing on stderr" "$(cat "$WORK/err")"; else ok "$command --help: nothing on stderr"; fi
	grep -q -- "^  -h, --help " "$WORK/out" && ok "$command --help: lists --help" || not_ok "$command --help: lists --help" "$(cat "$WORK/out")"
	cp "$WORK/out" "$WORK/help"
	check "help $command" 0 "^usage: kagent $command" "" -- help "$command"
	cmp -s "$WORK/out" "$WORK/help" && ok "help $command: the same text" || not_ok "help $command: the same text"
	check "$command -h" 0 "^usage: kagent $command" "" -- "$command" -h
	# Every long flag the help lists is one the parser takes: after it, only the bogus flag
	# is refused. (Flags with a value get "1".)
	refused=
	for flag in $(sed -n 's/^  \(-., \)\{0,1\} *\(--[a-z-]*\)\( [^ ]\{1,\}\)\{0,1\}.*/\2\3/p' "$WORK/help" | sed 's/ .*/=1/' | grep -v -e '^--help'); do
		"$KAGENT" "$command" "$flag" --zz-bogus > "$WORK/err" 2>&1
		grep -q -- "--zz-bogus" "$WORK/err" || refused="$refused $flag"
	done
	[ -z "$refused" ] && ok "$command: every listed flag is accepted" || not_ok "$command: every listed flag is accepted" "refused:$refused"
done

check "eval --help: a flag's default" 0 "--device cuda|cpu .*(default: cuda)" "" -- eval --help
check "optimize --help: a config key's help and default" 0 "--max-turns N .*model turns; 0: no limit (default: 40)" "" -- optimize --help
check "help alone: the command list" 0 "^  eval " "" -- help
check "help for an unknown command" 2 "" "unknown command 'nope'" -- help nope
grep -q "^commands:" "$WORK/err" && ok "help for an unknown command: the list on stderr" || not_ok "help for an unknown command: the list on stderr" "$(cat "$WORK/err")"
check "usage error: where to read more" 2 "" "try 'kagent eval --help'" -- eval --zz-bogus
check "usage error: the usage line" 2 "" "^usage: kagent optimize PROBLEM.py \[OPTIONS\]" -- optimize

# The generated bash completion, loaded into bash, completes commands, flags and values.
if command -v bash > /dev/null 2>&1; then
	# complete WORDS...: what _kagent offers for the last word.
	complete_words() {
		bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _kagent; echo "${COMPREPLY[*]}"' \
			complete "$BASH_COMPLETION" "$@" 2>&1
	}
	for case in "kagent ev|eval" "kagent eval --dev|--device --device-queues" "kagent eval --device c|cuda cpu" \
		"kagent help op|optimize" "kagent optimize --max-t|--max-turns --max-tokens" \
		"kagent -v tr|trace"; do
		words=${case%%|*} expected=${case#*|}
		# shellcheck disable=SC2086 # the words are meant to split
		got=$(set -f; complete_words $words)
		[ "$got" = "$expected" ] && ok "bash completes '$words'" || not_ok "bash completes '$words'" "got '$got', expected '$expected'"
	done
else
	for n in 1 2 3 4 5 6; do skip "bash completion $n" "no bash"; done
fi
if command -v zsh > /dev/null 2>&1; then
	zsh -n "$ZSH_COMPLETION" 2> "$WORK/err" && ok "zsh completion parses" || not_ok "zsh completion parses" "$(cat "$WORK/err")"
else
	skip "zsh completion parses" "no zsh on this machine"
fi
grep -q "^#compdef kagent" "$ZSH_COMPLETION" && ok "zsh completion: #compdef" || not_ok "zsh completion: #compdef" "$(head -n 2 "$ZSH_COMPLETION")"
if command -v groff > /dev/null 2>&1; then
	groff -man -ww -z "$MAN_PAGE" > "$WORK/err" 2>&1
	if [ $? -eq 0 ] && [ ! -s "$WORK/err" ]; then ok "man page: groff -man -ww finds nothing"; else not_ok "man page: groff -man -ww finds nothing" "$(cat "$WORK/err")"; fi
else
	skip "man page: groff -man -ww finds nothing" "no groff on this machine"
fi
[ "$failed" -eq 0 ]
