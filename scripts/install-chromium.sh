#!/usr/bin/env bash
# install-chromium.sh: make headless Chromium available to the end-to-end
# browser test of the web console (e2e/console_browser_test.go) as
# .cache/bin/chromium, without installing it system-wide where that can be
# avoided (scripts/lib/deb-tool.sh does the work, as for install-kcat.sh):
#
#   1. `apt-get download` the Debian package chromium and, resolved
#      recursively with `apt-cache depends`, each runtime dependency this
#      machine lacks; installed packages are not descended into.
#   2. `dpkg -x` them into .cache/chromium/root.
#   3. Write .cache/bin/chromium, a wrapper that sets LD_LIBRARY_PATH and
#      runs the extracted browser binary (usr/lib/chromium/chromium).
#
# Chromium has many library dependencies: when the extracted tree does not
# run (a library it loads is missing) and we are root, `apt-get install -y
# --no-install-recommends chromium` is the fallback and the wrapper runs the
# system's. A machine with chromium on PATH but no apt gets a wrapper around
# that one. When the package lists are missing or stale, `apt-get update`
# runs first (root only).
#
# A second run finds a working wrapper and does nothing. On failure it prints
# one line naming what is missing and exits 1. "Works" means: the browser
# renders about:blank headless (--dump-dom) within 60 seconds.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/deb-tool.sh"

works() {
	local profile dom
	profile=$(mktemp -d)
	dom=$(timeout 60 "$1" --headless=new --no-sandbox --disable-gpu --user-data-dir="$profile" --dump-dom about:blank 2>/dev/null) || true
	rm -rf "$profile"
	case $dom in *"<html"*) return 0 ;; esac
	return 1
}

tool=chromium
package=chromium
binary=usr/lib/chromium/chromium
system_binary=/usr/bin/chromium
env_var=MIRRORD_CHROMIUM
install_hint=chromium
walk=1
apt_install=1
deb_tool_install
