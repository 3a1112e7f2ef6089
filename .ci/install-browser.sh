#!/bin/sh
# install-browser.sh: Debian's Chromium, for the end-to-end test of the web
# demo (web/e2e), which drives it headless through chromedp. WebGPU runs
# there on Chromium's bundled SwiftShader, so no GPU or driver is needed.
#
# Idempotent: apt-get runs only when the package is missing, so a second run
# changes nothing and needs no network. Run it as root (or with sudo) on
# Debian 12 or a Debian-based system.
set -eu

"$(dirname "$0")/apt-ensure.sh" install-browser chromium

if [ ! -x /usr/lib/chromium/chromium ] && ! command -v chromium >/dev/null 2>&1; then
	echo "install-browser: warning: chromium installed but not found on PATH" >&2
fi
