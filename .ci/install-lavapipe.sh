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

"$(dirname "$0")/apt-ensure.sh" install-lavapipe mesa-vulkan-drivers gcc libc6-dev

# lavapipe registers itself here; without it wgpu-native finds no adapter.
if ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
	echo "install-lavapipe: warning: no lavapipe ICD file in /usr/share/vulkan/icd.d" >&2
fi
