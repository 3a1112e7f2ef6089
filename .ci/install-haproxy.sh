#!/bin/sh
# install-haproxy.sh: haproxy, the load balancer in front of the replicas
# of the multi-replica fault test (examples/deploy/replicas_test.go): it
# health-checks each `tessera serve` on /health and retries requests whose
# connection fails, as a cluster's Service or Gateway would.
#
# Idempotent: apt-get runs only when the package is missing, so a second run
# changes nothing and needs no network. Run it as root (or with sudo) on
# Debian 12 or a Debian-based system.
set -eu

"$(dirname "$0")/apt-ensure.sh" install-haproxy haproxy
