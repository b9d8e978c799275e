package bench

// Serving over TLS beside plaintext in the report: the serve-kafka-tls and
// serve-mirrord-tls rows (kafka_test.go) read the same data from the same
// server as serve-kafka and serve-mirrord, over its SSL listener. Their
// ratios to the plaintext rows are the cost of TLS on each server: over
// PLAINTEXT mirrord sends record bytes with sendfile, over TLS it reads,
// encrypts and writes them, as Kafka does on both.

import (
	"fmt"
	"strings"
)

const (
	// scenarioTLSSuffix ends a row served over an SSL listener; the
	// scenario without it is the plaintext row of the same server and data.
	scenarioTLSSuffix       = "-tls"
	scenarioServeMirrordTLS = scenarioServeMirrord + scenarioTLSSuffix
	scenarioServeKafkaTLS   = scenarioServeKafka + scenarioTLSSuffix
)

// withPlaintextRatios sets TimesPlaintext and CPUTimesPlaintext on every
// measured TLS row that has a measured plaintext row of the same variant.
func withPlaintextRatios(rows []row) {
	for i := range rows {
		r := &rows[i]
		plaintext, isTLS := strings.CutSuffix(r.Scenario, scenarioTLSSuffix)
		if !isTLS || !r.measured() {
			continue
		}
		plain, ok := findRow(rows, plaintext, r.Variant)
		if !ok {
			continue
		}
		r.TimesPlaintext = ratioOf(r.MegabytesPerSecond.Median, plain.MegabytesPerSecond.Median)
		r.CPUTimesPlaintext = ratioOf(r.CPUSecondsPerGigabyte.Median, plain.CPUSecondsPerGigabyte.Median)
	}
}

// writeTLSTable is each TLS row beside its plaintext row; nothing when the
// run has none.
func writeTLSTable(b *strings.Builder, rows []row) {
	var lines []string
	for _, r := range rows {
		if r.TimesPlaintext == nil && r.CPUTimesPlaintext == nil {
			continue
		}
		plaintext := strings.TrimSuffix(r.Scenario, scenarioTLSSuffix)
		plain, _ := findRow(rows, plaintext, r.Variant) // there: withPlaintextRatios found it
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |\n",
			markdownCell(plaintext), markdownCell(r.Variant),
			formatNumber(plain.MegabytesPerSecond.Median), formatNumber(r.MegabytesPerSecond.Median), formatRatio(r.TimesPlaintext),
			formatNumber(plain.CPUSecondsPerGigabyte.Median), formatNumber(r.CPUSecondsPerGigabyte.Median), formatRatio(r.CPUTimesPlaintext)))
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("## TLS\n\nThe same consumer reading the same data from the same server over its SSL listener " +
		"(client certificate required) and over PLAINTEXT, in the same repeat (medians).\n\n")
	b.WriteString("| Server | Variant | plaintext MB/s | TLS MB/s | TLS/plaintext MB/s | plaintext CPU-s/GB | TLS CPU-s/GB | TLS/plaintext CPU |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, line := range lines {
		b.WriteString(line)
	}
	b.WriteString("\n")
}

// serveTLSGoal is serveGoal over the SSL listeners: serving from mirrord
// over TLS is at least as fast as from the broker over TLS, on every
// variant both were measured on.
func serveTLSGoal(rows []row) goal {
	const name, target = "serving throughput over TLS from mirrord >= the Kafka broker's over TLS", 1.0
	throughput := func(r row) float64 { return r.MegabytesPerSecond.Median }
	if g, ok := worstPair(rows, name, scenarioServeMirrordTLS, scenarioServeKafkaTLS, throughput, "MB/s", target, false); ok {
		return g
	}
	return unmeasuredGoal(name, target, false, "no serve-mirrord-tls and serve-kafka-tls rows of the same variant")
}
