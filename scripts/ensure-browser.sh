#!/usr/bin/env bash
# The browser tests drive Debian's Chromium (never `playwright install`: it
# downloads a browser, which this network refuses). Install it if missing.
# A registry hiccup gets three tries; if it still fails, say so loudly and go
# on: the browser test then skips with that reason, and every other test runs.
set -uo pipefail
# Debian's MathJax 2 too: the dollar test (tests/browser/test_money_browser.py) serves it to exported pages.
if command -v chromium >/dev/null 2>&1 && [ -f /usr/share/javascript/mathjax/MathJax.js ]; then exit 0; fi
if [ "$(id -u)" != "0" ]; then
  echo "WARNING: chromium is missing and we are not root: the browser test will be skipped" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
  if apt-get update -qq >/dev/null && apt-get install -y -qq chromium libjs-mathjax >/dev/null; then
    exit 0
  fi
  echo "apt-get could not install chromium (attempt $attempt of 3)" >&2
  sleep $((attempt * 5))
done
echo "WARNING: chromium could not be installed: the browser test will be skipped" >&2
exit 0
