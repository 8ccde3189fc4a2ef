#!/usr/bin/env bash
# Installs what the browser tests (tests/e2e/console_browser.rs) drive, if missing: Debian's
# chromium and, under tests/browser/, npm's playwright-core (which never downloads a
# browser of its own: the tests point it at /usr/bin/chromium) and the screenshot
# comparison's pixelmatch and pngjs.
#
#   scripts/browser.sh install
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"

install_chromium() {
  if [[ -x "${WISP_CHROMIUM:-/usr/bin/chromium}" ]]; then
    return
  fi
  echo "browser.sh: installing chromium (Debian package)" >&2
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache show chromium >/dev/null 2>&1; then
    $sudo apt-get update -qq
  fi
  if ! $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  fi
}

install_driver() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "browser.sh: installing nodejs and npm (Debian packages)" >&2
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  local modules="$root/tests/browser/node_modules"
  if [[ -d "$modules/playwright-core" && -d "$modules/pixelmatch" && -d "$modules/pngjs" ]]; then
    return
  fi
  echo "browser.sh: installing playwright-core, pixelmatch and pngjs (npm)" >&2
  # Never let playwright fetch a browser: the tests use Debian's.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$root/tests/browser" --no-audit --no-fund >/dev/null
}

case "${1:-}" in
  install)
    install_chromium
    install_driver
    ;;
  *)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
