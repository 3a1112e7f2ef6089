#!/bin/sh
# apt-ensure.sh NAME PACKAGE...: install the Debian packages that are
# missing, as root or through sudo. NAME prefixes the messages.
#
# Idempotent: apt-get runs only when a package is missing, so a second run
# changes nothing and needs no network. The install-*.sh scripts beside it
# say which packages each test needs and why.
set -eu

name=$1
shift
missing=""
for p in "$@"; do
	if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "$name: already installed:$(printf ' %s' "$@")"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "$name: need root (or sudo) to install:$missing" >&2
		exit 1
	fi
	sudo="sudo"
fi

echo "$name: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086 # the package list is meant to split
$sudo apt-get install -y -q --no-install-recommends $missing
