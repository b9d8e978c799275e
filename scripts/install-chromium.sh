#!/usr/bin/env bash
# install-chromium.sh: make headless Chromium available to the end-to-end
# browser test of the web console (e2e/console_browser_test.go) as
# .cache/bin/chromium, without installing it system-wide where that can be
# avoided. It follows scripts/install-kcat.sh:
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

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=$repo/.cache
wrapper=$cache/bin/chromium
root=$cache/chromium/root

fail() {
	echo "install-chromium: $*" >&2
	exit 1
}

works() {
	local profile dom
	profile=$(mktemp -d)
	dom=$(timeout 60 "$1" --headless=new --no-sandbox --disable-gpu --user-data-dir="$profile" --dump-dom about:blank 2>/dev/null) || true
	rm -rf "$profile"
	case $dom in *"<html"*) return 0 ;; esac
	return 1
}

if [ -x "$wrapper" ] && works "$wrapper"; then
	exit 0
fi

is_root() { [ "$(id -u)" = 0 ]; }

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

has_candidate() {
	local candidate
	candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }')
	[ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

# dependency_groups PACKAGE prints one line per Depends/PreDepends of
# PACKAGE: its alternatives (a virtual package as <name>, then its providers).
dependency_groups() {
	apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances "$1" 2>/dev/null | awk '
		function flush() { if (group != "") print group; group = "" }
		/^  \|?(Pre)?Depends: / {
			if (!continuing) flush()
			name = $2; sub(/:any$/, "", name)
			group = group " " name
			continuing = ($1 ~ /^\|/)
			next
		}
		/^    [^ ]/ { name = $1; sub(/:.*$/, "", name); group = group " " name; next }
		/^  / { if (!continuing) flush(); continuing = 0 }
		END { flush() }'
}

# resolve prints chromium and every package it needs (recursively) that is not
# installed. A dependency group already satisfied by an installed or chosen
# package adds nothing. Bounded: at most 200 packages are visited.
resolve() {
	local -a queue=(chromium)
	local -A chosen=([chromium]=1)
	local head=0 package group alternative pick satisfied
	while [ "$head" -lt "${#queue[@]}" ]; do
		[ "$head" -lt 200 ] || fail "dependency walk of chromium visited 200 packages; giving up"
		package=${queue[$head]}
		head=$((head + 1))
		echo "$package"
		while read -r group; do
			satisfied=0
			pick=
			for alternative in $group; do
				case $alternative in "<"*) continue ;; esac
				if installed "$alternative" || [ -n "${chosen[$alternative]:-}" ]; then
					satisfied=1
					break
				fi
				[ -n "$pick" ] || pick=$alternative
			done
			[ "$satisfied" = 1 ] && continue
			[ -n "$pick" ] || fail "no installable package provides: $group (needed by $package)"
			chosen[$pick]=1
			queue+=("$pick")
		done < <(dependency_groups "$package")
	done
}

# write_wrapper KCAT LIBDIRS... writes the wrapper: LIBDIRS are relative to
# the cache folder, so the wrapper still works if the checkout moves.
write_wrapper() {
	local target=$1 libs="" dir
	shift
	for dir in "$@"; do
		libs="$libs\$cache/$dir:"
	done
	mkdir -p "$cache/bin"
	cat >"$wrapper.tmp" <<EOF
#!/bin/sh
# Written by scripts/install-chromium.sh: chromium with its own libraries.
cache=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH
exec $target "\$@"
EOF
	chmod +x "$wrapper.tmp"
	mv "$wrapper.tmp" "$wrapper"
}

# download_and_extract fetches the packages into a fresh tree and moves it
# into place only when it is whole.
download_and_extract() {
	local work=$cache/chromium/tmp.$$ deb
	local list
	local -a packages
	list=$(resolve) || return 1
	mapfile -t packages <<<"$list"
	rm -rf "$work"
	mkdir -p "$work/debs" "$work/root"
	if ! (cd "$work/debs" && apt-get download -q "${packages[@]}") >"$work/download.log" 2>&1; then
		echo "install-chromium: apt-get download ${packages[*]} failed: $(tail -n 1 "$work/download.log")" >&2
		rm -rf "$work"
		return 1
	fi
	for deb in "$work"/debs/*.deb; do
		dpkg -x "$deb" "$work/root" || { rm -rf "$work"; return 1; }
	done
	[ -x "$work/root/usr/lib/chromium/chromium" ] || { rm -rf "$work"; return 1; }
	rm -rf "$root"
	mv "$work/root" "$root"
	rm -rf "$work"
	echo "install-chromium: extracted ${packages[*]} into .cache/chromium/root" >&2
}

library_dirs() {
	find "$root" \( -type f -o -type l \) -name '*.so*' -printf '%h\n' | sort -u | sed "s|^$cache/||"
}

if ! command -v apt-get >/dev/null 2>&1; then
	system=$(command -v chromium || true)
	[ -n "$system" ] && works "$system" || fail "chromium is missing and there is no apt-get to fetch it: install chromium or set MIRRORD_CHROMIUM"
	write_wrapper "$system"
	exit 0
fi

updated=0
if ! has_candidate chromium && is_root; then
	apt-get update -qq >/dev/null
	updated=1
fi
has_candidate chromium || fail "apt knows no package chromium (run apt-get update as root, or install chromium and set MIRRORD_CHROMIUM)"

downloaded=0
if download_and_extract; then
	downloaded=1
elif is_root && [ "$updated" = 0 ]; then
	apt-get update -qq >/dev/null # stale lists: the mirror no longer has those versions
	download_and_extract && downloaded=1
fi

if [ "$downloaded" = 1 ]; then
	mapfile -t libs < <(library_dirs)
	write_wrapper '"$cache/chromium/root/usr/lib/chromium/chromium"' "${libs[@]}"
	if works "$wrapper"; then
		exit 0
	fi
	missing=$(LD_LIBRARY_PATH=$(printf "$cache/%s:" "${libs[@]}") ldd "$root/usr/lib/chromium/chromium" 2>/dev/null | awk '/not found/ { print $1 }' | tr '\n' ' ')
	echo "install-chromium: the extracted chromium does not run (missing libraries: ${missing:-unknown})" >&2
	rm -f "$wrapper"
fi

if is_root; then
	mkdir -p "$cache"
	if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >"$cache/chromium-apt-install.log" 2>&1 && works /usr/bin/chromium; then
		write_wrapper /usr/bin/chromium
		exit 0
	fi
	fail "apt-get install -y chromium failed: $(tail -n 1 "$cache/chromium-apt-install.log")"
fi
fail "could not fetch chromium with apt-get download and cannot apt-get install it without root: install the Debian package chromium or set MIRRORD_CHROMIUM"
