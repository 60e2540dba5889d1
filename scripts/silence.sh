#!/usr/bin/env bash
# silence.sh CMD...: runs CMD with stdout and stderr merged, passes its output through, and at the end
# reports the longest stretch with no output line (issue 28: none over 30 s in make demo or make test),
# the lines around it, and the total time; it exits with CMD's status.
#   scripts/silence.sh make demo
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CMD..." >&2; exit 2; }
us() { local t=${EPOCHREALTIME/./}; echo "${t#0}"; } # microseconds
start=$(us); last=$start; gap=0; prev="(start)"; before="(start)"; after=""
while IFS= read -r line || [ -n "$line" ]; do
  t=$(us)
  if (( t - last > gap )); then gap=$((t - last)); before=$prev; after=$line; fi
  last=$t; prev=$line
  printf '%s\n' "$line"
done < <("$@" 2>&1; echo "$?" > "${TMPDIR:-/tmp}/silence.$$")
t=$(us)
if (( t - last > gap )); then gap=$((t - last)); before=$prev; after="(end)"; fi
rc=$(cat "${TMPDIR:-/tmp}/silence.$$" 2>/dev/null || echo 1); rm -f "${TMPDIR:-/tmp}/silence.$$"
printf 'longest silence: %d.%01ds\n  after: %.100s\n  until: %.100s\ntotal: %ds\n' \
  $((gap / 1000000)) $((gap % 1000000 / 100000)) "$before" "$after" $(((t - start) / 1000000)) >&2
exit "$rc"
