#!/usr/bin/env bash
# Installs the system packages the tests need, when missing (Debian, root).
set -euo pipefail
here=$(dirname "$0")
if [ -x "$here/install-lavapipe.sh" ]; then "$here/install-lavapipe.sh"; fi
