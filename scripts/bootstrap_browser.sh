#!/usr/bin/env bash
# The browser tests drive Debian's chromium through Playwright (never `playwright install`,
# which downloads a browser), and inject axe-core, pinned, from the npm registry.
# Install whichever is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

AXE_VERSION=4.10.3
AXE_PREFIX=var/browser  # git-ignored with the rest of var/

sudo=""
[[ "$(id -u)" != "0" ]] && sudo="sudo"

if [[ ! -x /usr/bin/chromium ]]; then
  echo "bootstrap: installing Debian's chromium for the browser tests"
  # One apt at a time: scripts/bootstrap.sh may install tcmalloc beside this.
  flock /tmp/spechub-apt.lock sh -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium"
  /usr/bin/chromium --version
fi

installed() {
  node -p "require('./$AXE_PREFIX/node_modules/axe-core/package.json').version" 2>/dev/null || true
}

if [[ "$(installed)" != "$AXE_VERSION" ]]; then
  if ! command -v npm >/dev/null; then
    echo "bootstrap: installing Debian's npm to fetch axe-core"
    flock /tmp/spechub-apt.lock sh -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq npm"
  fi
  echo "bootstrap: installing axe-core@$AXE_VERSION into $AXE_PREFIX"
  mkdir -p "$AXE_PREFIX"
  npm install --prefix "$AXE_PREFIX" --save-exact --no-audit --no-fund --loglevel=error "axe-core@$AXE_VERSION"
  [[ "$(installed)" == "$AXE_VERSION" ]] || { echo "bootstrap: axe-core $AXE_VERSION did not install" >&2; exit 1; }
fi
