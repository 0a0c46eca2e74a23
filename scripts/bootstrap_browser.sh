#!/usr/bin/env bash
# The browser tests drive Debian's chromium through Playwright (never `playwright install`,
# which downloads a browser). Install chromium when it is missing.
set -euo pipefail
if [[ -x /usr/bin/chromium ]]; then
  exit 0
fi
echo "bootstrap: installing Debian's chromium for the browser tests"
sudo=""
[[ "$(id -u)" != "0" ]] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium
/usr/bin/chromium --version
