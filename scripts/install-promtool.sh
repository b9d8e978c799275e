#!/usr/bin/env bash
# install-promtool.sh: make promtool (Prometheus's rule checker and rule unit
# test runner) available to the tests of deploy/ as .cache/bin/promtool,
# without installing Prometheus system-wide.
#
#   1. `apt-get download` the Debian package prometheus (promtool in it is a
#      static Go binary: no dependency is needed to run it).
#   2. `dpkg -x` it into .cache/promtool/root.
#   3. Write .cache/bin/promtool, a wrapper that runs it.
#
# When the package lists are missing or stale, `apt-get update` runs first
# (root only). A machine with promtool on PATH but no apt gets a wrapper
# around that promtool.
#
# A second run finds a working wrapper and does nothing. On failure it prints
# one line naming what is missing and exits 1.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=$repo/.cache
wrapper=$cache/bin/promtool
root=$cache/promtool/root

fail() {
	echo "install-promtool: $*" >&2
	exit 1
}

works() { "$1" --version >/dev/null 2>&1; }

if [ -x "$wrapper" ] && works "$wrapper"; then
	exit 0
fi

is_root() { [ "$(id -u)" = 0 ]; }

has_candidate() {
	local candidate
	candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }')
	[ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

# write_wrapper PROMTOOL writes the wrapper; a path under the cache is
# written relative to it, so the wrapper still works if the checkout moves.
write_wrapper() {
	mkdir -p "$cache/bin"
	cat >"$wrapper.tmp" <<WRAPPER
#!/bin/sh
# Written by scripts/install-promtool.sh: promtool from Debian's prometheus package.
cache=\$(cd "\$(dirname "\$0")/.." && pwd)
exec $1 "\$@"
WRAPPER
	chmod +x "$wrapper.tmp"
	mv "$wrapper.tmp" "$wrapper"
}

# download_and_extract fetches the package into a fresh tree and moves it
# into place only when it holds promtool.
download_and_extract() {
	local work=$cache/promtool/tmp.$$ deb
	rm -rf "$work"
	mkdir -p "$work/debs" "$work/root"
	if ! (cd "$work/debs" && apt-get download -q prometheus) >"$work/download.log" 2>&1; then
		echo "install-promtool: apt-get download prometheus failed: $(tail -n 1 "$work/download.log")" >&2
		rm -rf "$work"
		return 1
	fi
	for deb in "$work"/debs/*.deb; do
		dpkg -x "$deb" "$work/root" || { rm -rf "$work"; return 1; }
	done
	[ -x "$work/root/usr/bin/promtool" ] || { rm -rf "$work"; return 1; }
	rm -rf "$root"
	mv "$work/root" "$root"
	rm -rf "$work"
	echo "install-promtool: extracted prometheus into .cache/promtool/root" >&2
}

if ! command -v apt-get >/dev/null 2>&1; then
	system=$(command -v promtool || true)
	[ -n "$system" ] && works "$system" || fail "promtool is missing and there is no apt-get to fetch it: install Prometheus's promtool"
	write_wrapper "$system"
	exit 0
fi

updated=0
if ! has_candidate prometheus && is_root; then
	apt-get update -qq >/dev/null
	updated=1
fi
has_candidate prometheus || fail "apt knows no package prometheus (run apt-get update as root, or install promtool)"

downloaded=0
if download_and_extract; then
	downloaded=1
elif is_root && [ "$updated" = 0 ]; then
	apt-get update -qq >/dev/null # stale lists: the mirror no longer has that version
	download_and_extract && downloaded=1
fi
[ "$downloaded" = 1 ] || fail "could not fetch the Debian package prometheus with apt-get download"

write_wrapper '"$cache/promtool/root/usr/bin/promtool"'
works "$wrapper" || { rm -f "$wrapper"; fail "the extracted promtool does not run: $("$root/usr/bin/promtool" --version 2>&1 | tail -n 1)"; }
