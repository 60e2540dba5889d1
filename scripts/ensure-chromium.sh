#!/usr/bin/env bash
# Makes sure a Chromium browser exists for the web view's browser test (controlplane/ui); installs
# Debian's chromium package if not. The test drives it headless over the DevTools protocol; nothing is
# downloaded at test time.
set -euo pipefail
if [ -n "${QLEET_CHROMIUM:-}" ] && [ -x "${QLEET_CHROMIUM}" ]; then exit 0; fi
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null; then exit 0; fi
done
if ! command -v apt-get >/dev/null; then
  echo "Chromium is missing and apt-get is not available: install chromium, or set QLEET_CHROMIUM to a Chromium binary" >&2
  exit 1
fi
echo ">> installing Chromium from Debian's packages (the web view's browser test)"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo ">> Chromium installed"
