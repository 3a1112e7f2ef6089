#!/bin/sh
# install-node.sh: what the JavaScript package's Node test (web/pkg_test.go)
# needs beyond Go: node (20 or later) and npm, and the `webgpu` npm package
# (Dawn's WebGPU for Node, with its prebuilt dawn.node), which the test runs
# on Chromium's SwiftShader Vulkan driver (install-browser.sh installs
# Chromium). The package goes to $TESSERA_NODE_MODULES's parent
# (default /usr/local/lib/tessera-node), where the test looks for it.
#
# Idempotent: npm runs only when the pinned version is missing, so a second
# run changes nothing and needs no network.
set -eu

version=0.6.2
prefix=${TESSERA_NODE_PREFIX:-/usr/local/lib/tessera-node}

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	"$(dirname "$0")/apt-ensure.sh" install-node nodejs npm
fi

have=$(node -p "try { require('$prefix/node_modules/webgpu/package.json').version } catch { '' }" 2>/dev/null || true)
if [ "$have" = "$version" ]; then
	echo "install-node: already installed: webgpu@$version in $prefix"
	exit 0
fi
echo "install-node: installing webgpu@$version into $prefix"
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error "webgpu@$version"
