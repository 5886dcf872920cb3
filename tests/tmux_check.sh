#!/usr/bin/env bash
# The dashboard as a person sees it: `manor play` in a real terminal (tmux), a few keys,
# and every screen printed, to be read by eye. Not part of the pytest suite.
#
#   tests/tmux_check.sh                      # the legacy recording at 80x24
#   tests/tmux_check.sh 120 40               # the same at 120x40
#   tests/tmux_check.sh 120 40 -- --agents 1000 --no-save   # a live run instead
#
# A replay: seek to the end, three ticks back, open the history of the third agents-table
# row, the run chart, the story filtered by "hobbes". A live run: let it tick, open a
# history, the run chart. PYTHON picks the interpreter (default: python).
set -euo pipefail

cols=80
rows=24
if [[ $# -ge 2 && $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]]; then
    cols=$1
    rows=$2
    shift 2
fi
play=(--replay saves/wacky_manor_legacy.msav)
if [[ $# -ge 1 && $1 == "--" ]]; then
    shift
    play=("$@")
fi
python=${PYTHON:-python}
cd "$(dirname "$0")/.."
command -v tmux >/dev/null || { echo "tmux_check: tmux is not installed" >&2; exit 2; }

session="manor-check-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true' EXIT
tmux new-session -d -s "$session" -x "$cols" -y "$rows" "$python -m manor play ${play[*]}; sleep 30"

# Wait until the screen shows $1 (a grep -E pattern), at most 30 s.
wait_for() {
    for _ in $(seq 300); do
        if tmux capture-pane -t "$session" -p | grep -Eq -- "$1"; then
            return 0
        fi
        sleep 0.1
    done
    echo "tmux_check: the screen never showed: $1" >&2
    tmux capture-pane -t "$session" -p >&2
    exit 1
}

# Press keys (tmux key names), let the dashboard redraw, print the screen under $1.
show() {
    local title=$1
    shift
    for key in "$@"; do
        tmux send-keys -t "$session" "$key"
        sleep 0.3
    done
    sleep 1
    printf '\n===== %s (%sx%s) =====\n' "$title" "$cols" "$rows"
    tmux capture-pane -t "$session" -p
}

if [[ ${play[0]} == --replay ]]; then
    wait_for "matches the recording|tick 0/"
    show "the end of the recording" End
    wait_for "tick ([0-9]+)/\\1 "
    show "three ticks back, paused" Left Left Left
    show "the third row's history" Down Down Enter
    wait_for "tick +kind +queued"
    show "back, then every tick's makespan" Escape m
    wait_for "makespan of every tick"
    show "the story filtered by hobbes" Escape / h o b b e s Enter
else
    wait_for "tick [1-9]"
    sleep 3
    show "running"
    show "the third row's history" Down Down Enter
    wait_for "tick +kind +queued"
    show "back, then every tick's makespan" Escape m
    wait_for "makespan of every tick"
fi
tmux send-keys -t "$session" Escape q
