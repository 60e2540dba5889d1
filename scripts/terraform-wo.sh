#!/usr/bin/env bash
# Usage: terraform-wo.sh TERRAFORM
# Succeeds when TERRAFORM runs and is 1.11 or later (it has write-only attributes); says why not otherwise.
set -uo pipefail
bin=${1:-}
if [ -z "$bin" ] || ! [ -x "$bin" ]; then
  echo ">> no terraform at '${bin}': the write-only attribute tests (terraform 1.11 or later) are skipped" >&2
  exit 1
fi
v=$("$bin" version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([0-9][0-9]*\)\.\([0-9][0-9]*\)\..*/\1 \2/p')
read -r major minor <<<"$v"
if [ -z "${major:-}" ] || [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 11 ]; }; then
  echo ">> $bin is terraform ${major:-?}.${minor:-?}: the write-only attribute tests need 1.11 or later, skipped" >&2
  exit 1
fi
