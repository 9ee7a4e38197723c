#!/usr/bin/env bash
# The browser tests drive Debian's Chromium (never `playwright install`: it
# downloads a browser, which this network refuses). Install it if missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != "0" ]; then
  echo "chromium is missing and we are not root: the browser tests will be skipped" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium >/dev/null
