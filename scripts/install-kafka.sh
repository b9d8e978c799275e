#!/usr/bin/env bash
# install-kafka.sh: resolve the Apache Kafka jars the interop suite and the
# benchmarks run (brokers in KRaft mode, console and perf tools, Kafka
# Connect, MirrorMaker 2 where the registry serves it, an slf4j binding) into
# .cache/kafka-<version>/libs, from kafkatest/pom.xml with
# `mvn dependency:copy-dependencies`.
#
# MirrorMaker 2 (connect-mirror) has its own pom and classpath,
# kafkatest/mm2/pom.xml -> .cache/kafka-<version>/mm2-libs (its registry may
# serve another release than the brokers'). When it cannot be resolved the
# script says so and goes on; the benchmarks then report MirrorMaker 2 as not
# measured (kafkatest.MirrorMakerInstalled). The brokers never depend on it.
#
# Needs Java 17 or newer and Maven; says which is missing. The jars are copied
# into a fresh folder that is moved into place only when whole, with a marker
# file holding the sha256 of the pom they came from, so a second run with the
# same pom finds them and does nothing (no network, no Maven), and a run after
# the pom changed (a dependency added) resolves them again. To retry a
# MirrorMaker 2 that was missing, remove .cache/kafka-<version>.
# Prints the libs folder on success.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pom=$repo/kafkatest/pom.xml
mm2_pom=$repo/kafkatest/mm2/pom.xml
version=$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' "$pom")
[ -n "$version" ] || { echo "install-kafka: no <kafka.version> in $pom" >&2; exit 1; }
target=$repo/.cache/kafka-$version
marker=$target/complete

fail() {
	echo "install-kafka: $*" >&2
	exit 1
}

command -v sha256sum >/dev/null 2>&1 || fail "sha256sum is missing (Debian: coreutils)"
pom_hash=$(cat "$pom" "$mm2_pom" | sha256sum | cut -d' ' -f1)
if [ -f "$marker" ] && [ -d "$target/libs" ] && [ "$(sed -n 's/^pom-sha256 //p' "$marker")" = "$pom_hash" ]; then
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

# resolve POM DIR: copy the runtime jars of POM into DIR.
resolve() {
	mvn -B -q -f "$1" dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory="$2" >"$work/mvn.log" 2>&1
}

if ! resolve "$pom" "$work/libs"; then
	tail -n 20 "$work/mvn.log" >&2
	fail "mvn dependency:copy-dependencies of $pom failed (log above)"
fi
mirrormaker=yes
if ! resolve "$mm2_pom" "$work/mm2-libs"; then
	echo "install-kafka: MirrorMaker 2 ($mm2_pom) could not be resolved; installing without it" \
		"(the benchmarks report it as not measured). Maven said:" >&2
	grep -m 1 -E 'Could not|not found' "$work/mvn.log" >&2 || tail -n 3 "$work/mvn.log" >&2
	rm -rf "$work/mm2-libs"
	mirrormaker=no
fi
for jar in kafka_2.13 kafka-tools connect-runtime; do
	[ -f "$work/libs/$jar-$version.jar" ] || fail "Maven finished but $jar-$version.jar is missing"
done
if [ $mirrormaker = yes ] && ! ls "$work/mm2-libs"/connect-mirror-*.jar >/dev/null 2>&1; then
	fail "Maven finished but no connect-mirror jar is in mm2-libs"
fi
{
	echo "pom-sha256 $pom_hash"
	echo "mirrormaker $mirrormaker"
	echo "installed $(date -u +%FT%TZ)"
} >"$work/complete"
rm -f "$work/mvn.log"
rm -rf "$target"
mv "$work" "$target"
trap - EXIT
echo "install-kafka: $(ls "$target/libs" | wc -l) jars in .cache/kafka-$version/libs (MirrorMaker 2: $mirrormaker)" >&2
echo "$target/libs"
