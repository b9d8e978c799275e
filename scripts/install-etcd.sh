#!/usr/bin/env bash
# install-etcd.sh: make etcd (the key-value store a mirrord cluster keeps its
# control plane in, docs/cluster.md) available to the end-to-end tests as
# .cache/bin/etcd, without installing it system-wide (scripts/lib/deb-tool.sh
# does the work).
#
#   1. `apt-get download` the Debian package etcd-server (etcd in it is a Go
#      binary that needs only libc6 to run; its other dependencies, adduser
#      and init-system-helpers, serve the package's system service: there is
#      no dependency walk).
#   2. `dpkg -x` it into .cache/etcd/root.
#   3. Write .cache/bin/etcd, a wrapper that runs it.
#
# When the package lists are missing or stale, `apt-get update` runs first
# (root only). There is no `apt-get install` fallback: it would install and
# start an etcd service system-wide on port 2379. A machine with etcd on PATH
# but no apt gets a wrapper around that etcd.
#
# A second run finds a working wrapper and does nothing. On failure it prints
# one line naming what is missing and exits 1.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/deb-tool.sh"

works() { "$1" --version >/dev/null 2>&1; }

tool=etcd
package=etcd-server
binary=usr/bin/etcd
system_binary=/usr/bin/etcd
env_var=MIRRORD_ETCD
install_hint="etcd (the Debian package etcd-server)"
walk=0
apt_install=0
deb_tool_install
