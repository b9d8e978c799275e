# scripts/lib/deb-tool.sh: the shared body of the scripts that make a test
# tool available as .cache/bin/<tool> from a Debian package, without
# installing it system-wide where that can be avoided (install-kcat.sh,
# install-chromium.sh, install-promtool.sh, install-etcd.sh). Sourced, not run.
#
# The caller sets `set -euo pipefail`, defines `works PATH` (true when the
# binary at PATH runs), sets these variables and calls deb_tool_install:
#
#   tool           the name: .cache/bin/$tool, .cache/$tool/root, messages
#   package        the Debian package holding it
#   binary         the binary's path inside the package (usr/bin/kcat)
#   system_binary  where `apt-get install $package` puts it (/usr/bin/kcat)
#   env_var        the variable the tests read instead (MIRRORD_KCAT)
#   install_hint   what to install by hand ("kcat (librdkafka)")
#   walk           1: download the package's missing runtime dependencies
#                  too and put their libraries on LD_LIBRARY_PATH; 0: the
#                  binary is static, the package alone is downloaded
#   apt_install    1: when root, `apt-get install -y --no-install-recommends
#                  $package` is the fallback when the download or the
#                  extracted tree fails; 0: no fallback, it fails
#
# What deb_tool_install does:
#   1. A working .cache/bin/$tool: nothing.
#   2. No apt-get: a wrapper around $tool on PATH, if that works.
#   3. `apt-get update` (root only) when apt knows no candidate for $package.
#   4. `apt-get download` $package (and with walk=1 each dependency this
#      machine lacks, resolved recursively with `apt-cache depends`;
#      installed packages are not descended into), `dpkg -x` them into
#      .cache/$tool/root, and write .cache/bin/$tool, a wrapper that runs
#      the extracted binary with LD_LIBRARY_PATH relative to the cache
#      folder (so it still works if the checkout moves). A failed download
#      as root is retried once after `apt-get update` (stale lists).
#   5. With apt_install=1 and root, the apt-get install fallback, and a
#      wrapper around $system_binary.
# On failure it prints one line naming what is missing and exits 1.

deb_tool_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

fail() {
	echo "install-$tool: $*" >&2
	exit 1
}

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

# resolve prints $package and, with walk=1, every package it needs
# (recursively) that is not installed. A dependency group already satisfied
# by an installed or chosen package adds nothing. Bounded: at most 200
# packages are visited.
resolve() {
	if [ "$walk" != 1 ]; then
		echo "$package"
		return
	fi
	local -a queue=("$package")
	local -A chosen=(["$package"]=1)
	local head=0 name group alternative pick satisfied
	while [ "$head" -lt "${#queue[@]}" ]; do
		[ "$head" -lt 200 ] || fail "dependency walk of $package visited 200 packages; giving up"
		name=${queue[$head]}
		head=$((head + 1))
		echo "$name"
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
			[ -n "$pick" ] || fail "no installable package provides: $group (needed by $name)"
			chosen[$pick]=1
			queue+=("$pick")
		done < <(dependency_groups "$name")
	done
}

# write_wrapper TARGET LIBDIRS... writes the wrapper: LIBDIRS are relative
# to the cache folder, so the wrapper still works if the checkout moves.
write_wrapper() {
	local target=$1 libs="" dir env=""
	shift
	for dir in "$@"; do
		libs="$libs\$cache/$dir:"
	done
	if [ -n "$libs" ]; then
		env="LD_LIBRARY_PATH=\"$libs\${LD_LIBRARY_PATH:-}\"
export LD_LIBRARY_PATH
"
	fi
	mkdir -p "$cache/bin"
	cat >"$wrapper.tmp" <<WRAPPER
#!/bin/sh
# Written by scripts/install-$tool.sh (scripts/lib/deb-tool.sh).
cache=\$(cd "\$(dirname "\$0")/.." && pwd)
${env}exec $target "\$@"
WRAPPER
	chmod +x "$wrapper.tmp"
	mv "$wrapper.tmp" "$wrapper"
}

# download_and_extract fetches the packages into a fresh tree and moves it
# into place only when it is whole and holds the binary.
download_and_extract() {
	local work=$cache/$tool/tmp.$$ deb
	local list
	local -a packages
	list=$(resolve) || return 1
	mapfile -t packages <<<"$list"
	rm -rf "$work"
	mkdir -p "$work/debs" "$work/root"
	if ! (cd "$work/debs" && apt-get download -q "${packages[@]}") >"$work/download.log" 2>&1; then
		echo "install-$tool: apt-get download ${packages[*]} failed: $(tail -n 1 "$work/download.log")" >&2
		rm -rf "$work"
		return 1
	fi
	for deb in "$work"/debs/*.deb; do
		dpkg -x "$deb" "$work/root" || { rm -rf "$work"; return 1; }
	done
	[ -x "$work/root/$binary" ] || { rm -rf "$work"; return 1; }
	rm -rf "$root"
	mv "$work/root" "$root"
	rm -rf "$work"
	echo "install-$tool: extracted ${packages[*]} into .cache/$tool/root" >&2
}

library_dirs() {
	[ "$walk" = 1 ] || return 0
	find "$root" \( -type f -o -type l \) -name '*.so*' -printf '%h\n' | sort -u | sed "s|^$cache/||"
}

deb_tool_install() {
	cache=$deb_tool_repo/.cache
	wrapper=$cache/bin/$tool
	root=$cache/$tool/root

	if [ -x "$wrapper" ] && works "$wrapper"; then
		return 0
	fi

	if ! command -v apt-get >/dev/null 2>&1; then
		local system
		system=$(command -v "$tool" || true)
		[ -n "$system" ] && works "$system" || fail "$tool is missing and there is no apt-get to fetch it: install $install_hint or set $env_var"
		write_wrapper "$system"
		return 0
	fi

	local updated=0
	if ! has_candidate "$package" && is_root; then
		apt-get update -qq >/dev/null
		updated=1
	fi
	has_candidate "$package" || fail "apt knows no package $package (run apt-get update as root, or install $tool and set $env_var)"

	local downloaded=0
	if download_and_extract; then
		downloaded=1
	elif is_root && [ "$updated" = 0 ]; then
		apt-get update -qq >/dev/null # stale lists: the mirror no longer has those versions
		download_and_extract && downloaded=1
	fi

	local -a libs
	local missing
	if [ "$downloaded" = 1 ]; then
		mapfile -t libs < <(library_dirs)
		write_wrapper "\"\$cache/$tool/root/$binary\"" "${libs[@]}"
		if works "$wrapper"; then
			return 0
		fi
		missing=$(LD_LIBRARY_PATH=$(printf "$cache/%s:" "${libs[@]}") ldd "$root/$binary" 2>/dev/null | awk '/not found/ { print $1 }' | tr '\n' ' ')
		rm -f "$wrapper"
		[ "$apt_install" = 1 ] || fail "the extracted $tool does not run (missing libraries: ${missing:-none; run $root/$binary to see why})"
		echo "install-$tool: the extracted $tool does not run (missing libraries: ${missing:-unknown})" >&2
	fi

	[ "$apt_install" = 1 ] || fail "could not fetch the Debian package $package with apt-get download: install $install_hint or set $env_var"
	if is_root; then
		mkdir -p "$cache"
		if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$package" >"$cache/$tool-apt-install.log" 2>&1 && works "$system_binary"; then
			write_wrapper "$system_binary"
			return 0
		fi
		fail "apt-get install -y $package failed: $(tail -n 1 "$cache/$tool-apt-install.log")"
	fi
	fail "could not fetch $tool with apt-get download and cannot apt-get install it without root: install the Debian package $package or set $env_var"
}
