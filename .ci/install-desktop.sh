#!/bin/sh
# install-desktop.sh: what examples/desktop (the Cogent Core chat app) needs
# to build and to run its end-to-end test on a Debian machine without a
# display.
#
# - libx11-dev libxcursor-dev libxrandr-dev libxinerama-dev libxi-dev
#   libgl1-mesa-dev libxxf86vm-dev: the headers GLFW (vendored by
#   Cogent Core's desktop system) is compiled against with cgo.
# - xvfb: a virtual X server for the test's window.
# - mesa-vulkan-drivers: lavapipe, the Vulkan driver on the CPU that both the
#   window and the model draw and compute with when there is no GPU.
# - gcc, libc6-dev: cgo.
#
# Idempotent: apt-get runs only when a package is missing, so a second run
# changes nothing and needs no network. Run it as root (or with sudo) on
# Debian 12 or a Debian-based system.
set -eu

packages="gcc libc6-dev mesa-vulkan-drivers xvfb libx11-dev libxcursor-dev libxrandr-dev libxinerama-dev libxi-dev libgl1-mesa-dev libxxf86vm-dev"

missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-desktop: already installed:$(printf ' %s' $packages)"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-desktop: need root (or sudo) to install:$missing" >&2
		exit 1
	fi
	sudo="sudo"
fi

echo "install-desktop: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086 # the package list is meant to split
$sudo apt-get install -y -q --no-install-recommends $missing
