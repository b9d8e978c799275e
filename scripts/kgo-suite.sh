#!/usr/bin/env bash
# kgo-suite.sh: run franz-go's own pkg/kgo tests (its integration tests
# against a live broker and its unit tests) against a fresh mirrord node.
#
#   1. Build bin/mirrord and start `mirrord serve` on 127.0.0.1:0 (the kernel
#      picks a free port, read back from the "serving" log line) with a fresh
#      data dir; wait until it answers an ApiVersions request.
#   2. Copy the franz-go module of go.mod (with its _test.go files) out of the
#      read-only module cache into .cache/kgo-suite/run.XXXXXX/franz-go.
#   3. `go test -race` its pkg/kgo with KGO_SEEDS pointing at mirrord and
#      KGO_TEST_RF=1 (one node), skipping the tests listed in $skips below:
#      each needs something mirrord does not have yet. Bounded by
#      KGO_SUITE_TIMEOUT (go test -timeout, default 10m;
#      a run takes about 35 s here once compiled).
#   4. Stop mirrord (SIGTERM, then SIGKILL after 10 s) on any exit. A
#      passing run removes its folder; a failing one keeps the mirrord log
#      and the test output in it (the path is printed) and removes the rest.
#
# Prints a summary (top-level tests run, passed, failed, skipped, wall time)
# and exits with go test's status. Extra arguments go to go test (e.g.
# -run 'TestPing$'). Do not -run single subtests of TestGroupETL or
# TestTxnEtl: each subtest takes a slot of franz-go's etlSem (4) before
# t.Run and only a subtest that runs gives it back, so four filtered-out
# ones block the rest until the timeout; run them whole
# (-run '^(TestGroupETL|TestTxnEtl)$').
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
GO=${GO:-go}
timeout=${KGO_SUITE_TIMEOUT:-10m}

fail() {
	echo "kgo-suite: $*" >&2
	exit 1
}

# Tests that need what mirrord does not serve yet, one per line as
# "Name<TAB>reason (the missing API)". Anchored to top-level test names.
skips=$(cat <<'EOF'
Test848RegexBrokerResolves	KIP-848 consumer groups: ConsumerGroupHeartbeat
TestShareGroup	share groups: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge
TestShareGroupETL	share groups: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge
TestShareGroupAckOnClose	share groups: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge
TestShareGroupOffsetsAdmin	share groups: ShareGroupHeartbeat, DescribeShareGroupOffsets, AlterShareGroupOffsets
TestConsumeRegexShareSkipsInternal	share groups: ShareGroupHeartbeat, ShareFetch
TestSCRAMAuth	SASL on the listener: SaslHandshake, SaslAuthenticate (SCRAM)
TestSCRAMAuthBadCredentials	SASL on the listener: SaslHandshake, SaslAuthenticate (SCRAM)
TestOAuthAuth	SASL on the listener: SaslHandshake, SaslAuthenticate (OAUTHBEARER)
EOF
)
# No pkg/kgo test of v1.22.3 issues DescribeConfigs, AlterConfigs or ACL
# requests, so none is skipped for them.
skip_regex="^($(cut -f1 <<<"$skips" | paste -sd'|'))\$"

version=$($GO list -m -f '{{.Version}}' github.com/twmb/franz-go) || fail "franz-go is not in go.mod"
module_dir=$($GO mod download -json "github.com/twmb/franz-go@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$module_dir/pkg/kgo" ] || fail "no source of github.com/twmb/franz-go@$version in the module cache"

echo "kgo-suite: building bin/mirrord"
$GO build -o bin/mirrord ./cmd/mirrord

mkdir -p .cache/kgo-suite
run=$(mktemp -d "$repo/.cache/kgo-suite/run.XXXXXX")
mirrord_log=$run/mirrord.log
test_log=$run/go-test.log
mirrord_pid=

cleanup() {
	local status=$?
	if [ -n "$mirrord_pid" ] && kill -0 "$mirrord_pid" 2>/dev/null; then
		kill -TERM "$mirrord_pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$mirrord_pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$mirrord_pid" 2>/dev/null; then
			echo "kgo-suite: mirrord did not stop within 10 s of SIGTERM; killing it" >&2
			kill -KILL "$mirrord_pid" 2>/dev/null || true
		fi
		wait "$mirrord_pid" 2>/dev/null || true
	fi
	rm -rf "$run/data" "$run/franz-go"
	if [ "$status" -eq 0 ]; then
		rm -rf "$run"
	else
		echo "kgo-suite: failed; mirrord log and test output kept in $run" >&2
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "kgo-suite: starting mirrord (data in $run/data)"
mkdir "$run/data"
./bin/mirrord serve --data-dir "$run/data" --listen 127.0.0.1:0 >"$mirrord_log" 2>&1 &
mirrord_pid=$!

# The listener's port, from mirrord's "serving" line (30 s at most).
addr=
for _ in $(seq 300); do
	kill -0 "$mirrord_pid" 2>/dev/null || fail "mirrord exited at start: $(tail -n 5 "$mirrord_log")"
	addr=$(sed -n 's/.* msg=serving listen=\([0-9.]*:[0-9]*\) .*/\1/p' "$mirrord_log" | head -n 1)
	[ -n "$addr" ] && break
	sleep 0.1
done
[ -n "$addr" ] || fail "mirrord logged no serving address within 30 s"

# It answers once an ApiVersions v0 request (correlation ID 1) gets a response
# carrying that correlation ID (10 s at most).
api_versions_answered() {
	local reply
	exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}" || return 1
	printf '\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff' >&3
	reply=$(timeout 2 head -c 8 <&3 | od -An -tx1 | tr -d ' \n') || true
	exec 3<&- 3>&-
	[ "${reply:8:8}" = "00000001" ]
}
answered=
for _ in $(seq 100); do
	if api_versions_answered 2>/dev/null; then
		answered=1
		break
	fi
	sleep 0.1
done
[ -n "$answered" ] || fail "mirrord at $addr did not answer ApiVersions within 10 s"
echo "kgo-suite: mirrord answers at $addr"

cp -r "$module_dir" "$run/franz-go"
chmod -R u+w "$run/franz-go"

echo "kgo-suite: franz-go $version pkg/kgo, timeout $timeout, skipping:"
sed 's/^/  /; s/\t/: /' <<<"$skips"

# -trimpath keeps the build cache valid across runs, whose copies of the
# module live in different folders.
start=$(date +%s)
set +e
(
	cd "$run/franz-go/pkg/kgo" &&
		KGO_SEEDS=$addr KGO_TEST_RF=1 KGO_LOG_LEVEL=${KGO_LOG_LEVEL:-none} \
			$GO test -race -count=1 -trimpath -timeout "$timeout" -v -skip "$skip_regex" "$@" .
) 2>&1 | tee "$test_log"
status=${PIPESTATUS[0]}
set -e
wall=$(($(date +%s) - start))

count() { grep -c "^--- $1: " "$test_log" || true; }
passed=$(count PASS)
failed=$(count FAIL)
skipped=$(count SKIP)
echo "kgo-suite: franz-go $version pkg/kgo against mirrord: $((passed + failed + skipped)) top-level tests ran:" \
	"$passed passed, $failed failed, $skipped skipped by the tests themselves;" \
	"$(grep -c . <<<"$skips") excluded by -skip; ${wall}s; go test exit $status"
if [ "$failed" -gt 0 ]; then
	echo "kgo-suite: failed: $(sed -n 's/^--- FAIL: \([^ ]*\) .*/\1/p' "$test_log" | paste -sd' ')"
fi
exit "$status"
