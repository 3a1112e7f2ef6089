#!/bin/sh
# install-lavapipe.sh: make a Debian machine without a GPU able to build and
# test runtime/gpu.
#
# - mesa-vulkan-drivers: lavapipe, Mesa's Vulkan driver on the CPU, which
#   wgpu-native finds like any GPU (it brings the Vulkan loader, libvulkan1,
#   which wgpu-native loads at run time).
# - gcc, libc6-dev: cgo, to build github.com/cogentcore/webgpu, which links
#   a static wgpu-native with -lm -ldl. No other -dev package is needed.
#
# Idempotent: it calls apt-get only for packages that are missing, so a
# second run changes nothing and needs no network. Run it as root (or with
# sudo available) on Debian 12 or a Debian-based system.
set -eu

packages="mesa-vulkan-drivers gcc libc6-dev"

missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-lavapipe: already installed:$(printf ' %s' $packages)"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-lavapipe: need root (or sudo) to install:$missing" >&2
		exit 1
	fi
	sudo="sudo"
fi

echo "install-lavapipe: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086 # the package list is meant to split
$sudo apt-get install -y -q --no-install-recommends $missing

# lavapipe registers itself here; without it wgpu-native finds no adapter.
if ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
	echo "install-lavapipe: warning: no lavapipe ICD file in /usr/share/vulkan/icd.d" >&2
fi
