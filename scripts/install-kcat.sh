#!/usr/bin/env bash
# install-kcat.sh: make kcat (librdkafka's command-line client) available to
# the end-to-end tests as .cache/bin/kcat, without installing it system-wide
# where that can be avoided (scripts/lib/deb-tool.sh does the work).
#
#   1. `apt-get download` the Debian package kcat and, resolved recursively
#      with `apt-cache depends`, each runtime dependency this machine lacks
#      (librdkafka1, libyajl2, ...); installed packages are not descended into.
#   2. `dpkg -x` them into .cache/kcat/root.
#   3. Write .cache/bin/kcat, a wrapper that sets LD_LIBRARY_PATH.
#
# When the package lists are missing or stale, `apt-get update` runs first
# (root only). When downloading fails and we are root, `apt-get install -y
# kcat` is the fallback and the wrapper runs the system kcat. A machine with
# kcat on PATH but no apt gets a wrapper around that kcat.
#
# A second run finds a working wrapper and does nothing. On failure it prints
# one line naming what is missing and exits 1.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/deb-tool.sh"

works() { "$1" -V >/dev/null 2>&1; }

tool=kcat
package=kcat
binary=usr/bin/kcat
system_binary=/usr/bin/kcat
env_var=MIRRORD_KCAT
install_hint="kcat (librdkafka)"
walk=1
apt_install=1
deb_tool_install
