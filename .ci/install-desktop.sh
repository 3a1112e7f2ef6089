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

"$(dirname "$0")/apt-ensure.sh" install-desktop gcc libc6-dev mesa-vulkan-drivers xvfb libx11-dev libxcursor-dev libxrandr-dev libxinerama-dev libxi-dev libgl1-mesa-dev libxxf86vm-dev
