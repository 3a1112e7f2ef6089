#!/bin/sh
# install-qemu.sh: what `make test-arm64` needs to run arm64 builds on an
# amd64 machine (there is no arm64 machine in CI).
#
# - qemu-user: qemu-aarch64, user-mode emulation of arm64 Linux binaries.
#   `-cpu max` reports NEON and the dot-product extension to x/sys/cpu, so
#   the assembly paths run, not only the Go twins. Go's own test binaries
#   are static and need nothing else: the runtime package's arm64 tests run
#   from a CPU-only build (CGO_ENABLED=0), so no cross C compiler either.
#
# Idempotent: apt-get runs only when a package is missing, so a second run
# changes nothing and needs no network. Run it as root (or with sudo) on
# Debian 12 or a Debian-based system.
set -eu

"$(dirname "$0")/apt-ensure.sh" install-qemu qemu-user
