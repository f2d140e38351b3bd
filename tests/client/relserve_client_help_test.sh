#!/usr/bin/env bash
# relserve-client SUBCOMMAND --help, for every subcommand `relserve-client --help` lists: its
# usage on standard output, exit 0, no server needed; an unknown flag still exits 2 with a
# JSON error naming it. Arguments: bin dir, source root.
set -Eeuo pipefail
trap 'echo "FAILED: line $LINENO of $(basename "$0"): $BASH_COMMAND"' ERR
client="$1/relserve-client"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$client" --help > "$work/top"
# The subcommands: the indented lines between "subcommands:" and the next blank line.
mapfile -t subcommands < <(sed -n '/^subcommands:/,/^$/p' "$work/top" | sed -n 's/^  \([a-z-]*\) .*/\1/p')
[ "${#subcommands[@]}" -ge 8 ] || { echo "FAILED: only ${#subcommands[@]} subcommands in --help"; cat "$work/top"; exit 1; }

for s in "${subcommands[@]}"; do
  for help in --help -h; do
    rc=0
    "$client" "$s" "$help" > "$work/out" 2> "$work/err" < /dev/null || rc=$?
    [ "$rc" -eq 0 ] || { echo "FAILED: $s $help exited $rc: $(cat "$work/err")"; exit 1; }
    head -n 1 "$work/out" | grep -q "^usage: relserve-client $s \[flags\]" \
      || { echo "FAILED: $s $help printed: $(cat "$work/out")"; exit 1; }
    [ ! -s "$work/err" ] || { echo "FAILED: $s $help wrote to standard error: $(cat "$work/err")"; exit 1; }
  done
  # Every subcommand's usage shows how to reach the server.
  grep -q -- "--target" "$work/out" || { echo "FAILED: $s --help lacks --target"; exit 1; }
  rc=0
  "$client" "$s" --no-such-flag > "$work/out" 2> "$work/err" < /dev/null || rc=$?
  [ "$rc" -eq 2 ] || { echo "FAILED: $s --no-such-flag exited $rc"; exit 1; }
  grep -q 'unknown flag --no-such-flag' "$work/err" || { echo "FAILED: $s: $(cat "$work/err")"; exit 1; }
  [ ! -s "$work/out" ] || { echo "FAILED: $s --no-such-flag wrote to standard output"; exit 1; }
done
echo "relserve-client --help: passed for ${subcommands[*]}"
