#!/usr/bin/env bash
# Installs the system packages the tests need, when missing (Debian, root).
set -euo pipefail
here=$(dirname "$0")
if [ -x "$here/install-lavapipe.sh" ]; then "$here/install-lavapipe.sh"; fi
if [ -x "$here/install-browser.sh" ]; then "$here/install-browser.sh"; fi
if [ -x "$here/install-node.sh" ]; then "$here/install-node.sh"; fi
if [ -x "$here/install-desktop.sh" ]; then "$here/install-desktop.sh"; fi
if [ -x "$here/install-haproxy.sh" ]; then "$here/install-haproxy.sh"; fi
if [ -x "$here/install-qemu.sh" ]; then "$here/install-qemu.sh"; fi
