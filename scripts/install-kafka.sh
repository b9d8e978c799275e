#!/usr/bin/env bash
# install-kafka.sh: resolve the Apache Kafka jars the interop suite and the
# benchmarks run (brokers in KRaft mode, console and perf tools, an slf4j
# binding) into .cache/kafka-<version>/libs, from kafkatest/pom.xml with
# `mvn dependency:copy-dependencies`.
#
# Needs Java 17 or newer and Maven; says which is missing. The jars are copied
# into a fresh folder that is moved into place only when whole, with a marker
# file, so a second run finds them and does nothing (no network, no Maven).
# Prints the libs folder on success.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pom=$repo/kafkatest/pom.xml
version=$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' "$pom")
[ -n "$version" ] || { echo "install-kafka: no <kafka.version> in $pom" >&2; exit 1; }
target=$repo/.cache/kafka-$version
marker=$target/complete

fail() {
	echo "install-kafka: $*" >&2
	exit 1
}

if [ -f "$marker" ] && [ -d "$target/libs" ]; then
	echo "$target/libs"
	exit 0
fi

command -v java >/dev/null 2>&1 || fail "java is missing: Kafka $version needs Java 17 or newer (Debian: openjdk-17-jre-headless)"
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
case $java_major in
1.*) java_major=${java_major#1.} ;;
esac
[ -n "$java_major" ] && [ "$java_major" -ge 17 ] || fail "java is version ${java_major:-unknown}: Kafka $version needs Java 17 or newer"
command -v mvn >/dev/null 2>&1 || fail "mvn (Maven) is missing: it resolves the Kafka jars from Maven Central (Debian: maven)"

work=$target.tmp.$$
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
if ! mvn -B -q -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
	-DoutputDirectory="$work/libs" >"$work/mvn.log" 2>&1; then
	tail -n 20 "$work/mvn.log" >&2
	fail "mvn dependency:copy-dependencies of $pom failed (log above)"
fi
ls "$work/libs"/kafka_2.13-"$version".jar "$work/libs"/kafka-tools-"$version".jar >/dev/null 2>&1 ||
	fail "Maven finished but kafka_2.13-$version.jar or kafka-tools-$version.jar is missing"
date -u +%FT%TZ >"$work/complete"
rm -f "$work/mvn.log"
rm -rf "$target"
mv "$work" "$target"
trap - EXIT
echo "install-kafka: $(ls "$target/libs" | wc -l) jars in .cache/kafka-$version/libs" >&2
echo "$target/libs"
