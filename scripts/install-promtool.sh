#!/usr/bin/env bash
# install-promtool.sh: make promtool (Prometheus's rule checker and rule unit
# test runner) available to the tests of deploy/ as .cache/bin/promtool,
# without installing Prometheus system-wide (scripts/lib/deb-tool.sh does
# the work).
#
#   1. `apt-get download` the Debian package prometheus (promtool in it is a
#      static Go binary: no dependency is needed to run it, so there is no
#      dependency walk).
#   2. `dpkg -x` it into .cache/promtool/root.
#   3. Write .cache/bin/promtool, a wrapper that runs it.
#
# When the package lists are missing or stale, `apt-get update` runs first
# (root only). There is no `apt-get install` fallback: it would install the
# Prometheus server system-wide. A machine with promtool on PATH but no apt
# gets a wrapper around that promtool.
#
# A second run finds a working wrapper and does nothing. On failure it prints
# one line naming what is missing and exits 1.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/deb-tool.sh"

works() { "$1" --version >/dev/null 2>&1; }

tool=promtool
package=prometheus
binary=usr/bin/promtool
system_binary=/usr/bin/promtool
env_var=MIRRORD_PROMTOOL
install_hint="Prometheus's promtool"
walk=0
apt_install=0
deb_tool_install
