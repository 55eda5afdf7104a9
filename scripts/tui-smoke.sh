#!/usr/bin/env bash
# tui-smoke.sh — drive `mgpu-learn start` in a real terminal.
#
# Starts the UI on the CPU fixture course inside a private tmux server (a 100×30 window, no
# colour), then, with send-keys and capture-pane: opens a lesson and turns a page, goes back,
# opens the `sum` exercise, runs a check (the fixture's starter fails at correctness; it needs
# only cc), waits for the result screen, goes back and quits, and asserts that the UI exited.
# It builds nothing: `make tui-smoke` builds bin/mgpu-learn first.
#
# Environment: MGPU_LEARN_BIN (default bin/mgpu-learn); TUI_SMOKE_SCREENS=DIR also saves each
# captured screen there as <name>.txt (docs/tui.md shows them); TUI_SMOKE_TIMEOUT (seconds to
# wait for the check's result, default 120).
# Exit status: 0 when every step passed, 1 when one failed (the screens seen are printed),
# 2 when something it needs is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MGPU_LEARN_BIN:-$root/bin/mgpu-learn}
course=$root/testdata/fixture-course
check_timeout=${TUI_SMOKE_TIMEOUT:-120}

if [[ ! -x $bin ]]; then
	echo "tui-smoke: $bin is missing; run 'make tui-smoke', which builds it first" >&2
	exit 2
fi
for tool in tmux cc; do
	if ! command -v "$tool" >/dev/null; then
		echo "tui-smoke: $tool is not installed (the smoke test needs it)" >&2
		exit 2
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mgpu-tui-smoke.XXXXXX")
sock=$tmp/tmux.sock
session=smoke
tm() { tmux -S "$sock" "$@"; }
cleanup() {
	tm kill-server >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

last=""  # the newest capture
seen=()  # "name" of every screen saved, for the failure report
declare -A screens=()

capture() { last=$(tm capture-pane -p -t "$session" 2>/dev/null || true); }

save() { # save NAME: keep the current screen (and write it to TUI_SMOKE_SCREENS)
	capture
	screens[$1]=$last
	seen+=("$1")
	if [[ -n ${TUI_SMOKE_SCREENS:-} ]]; then
		mkdir -p "$TUI_SMOKE_SCREENS"
		printf '%s\n' "$last" | sed -e 's/[[:space:]]*$//' >"$TUI_SMOKE_SCREENS/$1.txt"
	fi
}

fail() {
	echo "tui-smoke: FAIL: $*" >&2
	for name in "${seen[@]}"; do
		printf '\n--- screen "%s" ---\n%s\n' "$name" "${screens[$name]}" >&2
	done
	printf '\n--- screen now ---\n%s\n' "$last" >&2
	exit 1
}

wait_for() { # wait_for SECONDS TEXT...: until the screen shows every TEXT
	local secs=$1
	shift
	local deadline=$((SECONDS + secs))
	while :; do
		capture
		local all=1 w
		for w in "$@"; do
			grep -qF -- "$w" <<<"$last" || all=0
		done
		((all)) && return 0
		((SECONDS >= deadline)) && fail "waited ${secs}s for: $*"
		sleep 0.2
	done
}

expect() { # expect TEXT...: the screen saved last shows every TEXT
	local w
	for w in "$@"; do
		grep -qF -- "$w" <<<"$last" || fail "the screen lacks \"$w\""
	done
}

keys() { tm send-keys -t "$session" "$@"; }

"$bin" --course "$course" init "$tmp/ws" >/dev/null || fail "mgpu-learn init failed"

tm -f /dev/null new-session -d -s "$session" -x 100 -y 30 -c "$tmp/ws" \
	env NO_COLOR=1 TERM=xterm-256color MGPU_LEARN_CACHE="$tmp/cache" EDITOR=true \
	"$bin" --course "$course" --workspace "$tmp/ws" start
tm set-option -g escape-time 0 >/dev/null
tm set-option -g remain-on-exit off >/dev/null

echo "tui-smoke: course map"
wait_for 30 "course map" "Fixtures for the checker" "sum" "timing"
save map
expect "lesson: What the fixtures are for" "0/2 passed"

echo "tui-smoke: lesson"
keys Enter
wait_for 15 "page 1/2" "What the fixtures are for"
keys l
wait_for 15 "page 2/2" "The two exercises"
save lesson
keys Escape
wait_for 15 "course map"

echo "tui-smoke: exercise"
keys Down Enter
wait_for 15 "exercise module0/sum" "your file:" "sum.c"
# The machine's probe runs in the background from the start ("checking this machine…" until
# it is done); on a busy CI machine it can outlast the steps above.
wait_for 60 "Add two vectors" "runs here"
save exercise

echo "tui-smoke: check"
keys c
deadline=$((SECONDS + check_timeout))
run_seen=0
while :; do
	capture
	if ((!run_seen)) && grep -qF "Checking module0/sum" <<<"$last" && grep -qF "rank" <<<"$last"; then
		save run
		run_seen=1
	fi
	grep -qF "result of module0/sum" <<<"$last" && break
	((SECONDS >= deadline)) && fail "no result screen after ${check_timeout}s"
	sleep 0.1
done
wait_for 5 "FAILED" "correctness"
save result
expect "module0/sum" "Whose fault: your code" "Stages" "build"

echo "tui-smoke: back and quit"
keys Escape
wait_for 15 "exercise module0/sum" "last check: failed at correctness"
keys Escape
wait_for 15 "course map"
keys q
for _ in $(seq 1 100); do
	tm has-session -t "$session" 2>/dev/null || break
	sleep 0.1
done
if tm has-session -t "$session" 2>/dev/null; then
	capture
	fail "the UI did not exit after q"
fi
echo "tui-smoke: ok"
