#!/bin/sh
# install-qemu.sh: qemu-user, whose qemu-aarch64 runs the arm64 build of the
# CPU kernels' tests (`make test-arm64`): there is no arm64 machine in CI,
# and Go test binaries are static, so user-mode emulation needs no arm64
# libraries. `-cpu max` gives the NEON and dot-product features x/sys/cpu
# reads, so the assembly paths run, not only the Go twins.
#
# Idempotent: apt-get runs only when the package is missing, so a second run
# changes nothing and needs no network. Run it as root (or with sudo) on
# Debian 12 or a Debian-based system.
set -eu

"$(dirname "$0")/apt-ensure.sh" install-qemu qemu-user
