#!/bin/sh
# install-browser.sh: Debian's Chromium, for the end-to-end test of the web
# demo (web/e2e), which drives it headless through chromedp. WebGPU runs
# there on Chromium's bundled SwiftShader, so no GPU or driver is needed.
#
# Idempotent: apt-get runs only when the package is missing, so a second run
# changes nothing and needs no network. Run it as root (or with sudo) on
# Debian 12 or a Debian-based system.
set -eu

packages="chromium"

missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-browser: already installed:$(printf ' %s' $packages)"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-browser: need root (or sudo) to install:$missing" >&2
		exit 1
	fi
	sudo="sudo"
fi

echo "install-browser: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086 # the package list is meant to split
$sudo apt-get install -y -q --no-install-recommends $missing

if [ ! -x /usr/lib/chromium/chromium ] && ! command -v chromium >/dev/null 2>&1; then
	echo "install-browser: warning: chromium installed but not found on PATH" >&2
fi
