#!/usr/bin/env bash
# Makes sure PostgreSQL server binaries (initdb, pg_ctl) exist; installs Debian's postgresql package if not.
# Tests start their own throwaway server in a temp dir (internal/pgtest), so no service is started here.
set -euo pipefail
if [ -n "${QLEET_TEST_DATABASE_URL:-}" ]; then exit 0; fi
for d in /usr/lib/postgresql/*/bin; do
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then exit 0; fi
done
if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then exit 0; fi
if ! command -v apt-get >/dev/null; then
  echo "PostgreSQL is missing and apt-get is not available: install PostgreSQL 15+ server binaries, or set QLEET_TEST_DATABASE_URL" >&2
  exit 1
fi
echo ">> installing PostgreSQL from Debian's packages"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
echo ">> PostgreSQL installed"
