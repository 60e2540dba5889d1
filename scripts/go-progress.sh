#!/usr/bin/env bash
# go-progress.sh LABEL GO-BUILD-ARGS...: runs `go build -v ARGS` and, instead of the package names it
# lists, prints how many packages have been compiled so far every 10 s (issue 28: no silent stretch
# over 30 s; a cold build compiles about 1,500 packages). Errors pass through; the exit status is go's.
# GO_VERB=install runs `go install -v ARGS` instead (for pkg@version).
#   scripts/go-progress.sh bin/qleet -o bin/qleet ./controlplane/cmd/qleet
#   GO_VERB=install GOBIN=$PWD/bin scripts/go-progress.sh terraform github.com/hashicorp/terraform@v1.5.7
set -uo pipefail
label=$1; shift
us() { local t=${EPOCHREALTIME/./}; echo "${t#0}"; }
n=0; start=$(us); shown=$start
last=""
while :; do
  if IFS= read -r -t 2 line; then
    case $line in
      "#"* | *.go:* | *" "*) printf '%s\n' "$line" >&2 ;; # diagnostics
      *) n=$((n + 1)); last=$line ;;
    esac
  elif (( $? <= 128 )); then
    break # end of output (a timeout is > 128)
  fi
  t=$(us)
  if (( t - shown >= 10000000 )); then
    printf '   %s: still building, %d packages compiled so far (%ds%s)\n' "$label" "$n" $(((t - start) / 1000000)) "${last:+; last $last}"
    shown=$t
  fi
done < <(${GO:-go} "${GO_VERB:-build}" -v "$@" 2>&1; echo "$?" > "${TMPDIR:-/tmp}/go-progress.$$")
rc=$(cat "${TMPDIR:-/tmp}/go-progress.$$" 2>/dev/null || echo 1); rm -f "${TMPDIR:-/tmp}/go-progress.$$"
printf '   %s: %d packages compiled, built in %ds\n' "$label" "$n" $((($(us) - start) / 1000000))
exit "$rc"
