#!/usr/bin/env bash
# Runs every test: the main module (unit, integration, provider acceptance), tools/kubesim and
# tools/image, the provider's write-only tests under terraform 1.11, and the provider tests under OpenTofu.
# Ends with a summary and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export TF_ACC=1
export TF_ACC_TERRAFORM_PATH="$root/bin/terraform"
export QLEET_KUBESIM_BIN="$root/bin/kubesim"
timeout="${TEST_TIMEOUT:-40m}"
log=$(mktemp -d)
status=0

run() {
  local name=$1; shift
  local start=$SECONDS
  echo ">> $name: $*"
  # A heartbeat: go test prints a package's result only when it ends, and the longest take minutes.
  (while sleep 20; do echo "   ... $name: running for $((SECONDS - start))s; $(grep -cE '^(ok|FAIL)[[:space:]]' "$log/$name.log" 2>/dev/null || true) packages done"; done) &
  local beat=$!
  if "$@" 2>&1 | tee "$log/$name.log"; then
    echo "ok   $name ($((SECONDS - start))s)" >> "$log/summary"
  else
    echo "FAIL $name ($((SECONDS - start))s)" >> "$log/summary"
    status=1
  fi
  kill "$beat" 2>/dev/null; wait "$beat" 2>/dev/null
}

run main go test -count=1 -timeout "$timeout" -p 2 ./...
run kubesim bash -c "cd tools/kubesim && go test -count=1 -timeout $timeout ./..."
run image bash -c "cd tools/image && go test -count=1 -timeout $timeout ./..."
# The provider's write-only attributes need terraform 1.11 or later; bin/terraform is 1.5.7.
terraform_wo="${TERRAFORM_WO:-/usr/local/bin/terraform}"
if ./scripts/terraform-wo.sh "$terraform_wo"; then
  run provider-write-only env TF_ACC_TERRAFORM_PATH="$terraform_wo" go test -count=1 -timeout "$timeout" -run TestAccWriteOnly ./provider/
else
  echo "skip provider-write-only: no terraform 1.11 or later at $terraform_wo" >> "$log/summary"
fi

# OpenTofu: the provider tests again, under bin/tofu (make test-tofu builds it when absent).
run tofu make --no-print-directory test-tofu

echo
echo "==== test summary ===="
cat "$log/summary"
grep -h -- "^--- FAIL" "$log"/*.log | sed 's/^/  /' || true
if [ $status -ne 0 ]; then echo "TESTS FAILED"; else echo "ALL TESTS PASSED"; fi
exit $status
