#!/usr/bin/env bash
# find-terraform.sh: prints the terraform the demos run: bin/terraform when it exists, else a terraform on
# PATH of version 1.5.7 or later (the provider's floor), so that a cold `make demo` need not build one.
# Exits 1, saying why on stderr, when there is neither; `make demo` then builds terraform 1.5.7 into bin/.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$root/bin/terraform" ]; then
  echo "$root/bin/terraform"
  exit 0
fi
tf=$(command -v terraform 2>/dev/null) || { echo "no bin/terraform and no terraform on PATH" >&2; exit 1; }
v=$("$tf" version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([0-9][0-9]*\)\.\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2 \3/p')
read -r major minor patch <<<"$v"
if [ -z "${major:-}" ]; then
  echo "$tf does not report a terraform version" >&2
  exit 1
fi
if [ "$major" -eq 1 ] && { [ "$minor" -gt 5 ] || { [ "$minor" -eq 5 ] && [ "$patch" -ge 7 ]; }; }; then
  echo "$tf"
  exit 0
fi
echo "$tf is terraform $major.$minor.$patch; the demo needs 1.5.7 or a later 1.x" >&2
exit 1
