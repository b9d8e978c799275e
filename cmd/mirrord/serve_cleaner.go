package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/mirrord/mirrord/engine"
)

// cleanerFlags declares the log cleaner's node settings under Kafka's
// broker config names (dots as dashes) and returns their reader.
func cleanerFlags(flags *flag.FlagSet) func() (engine.CleanerConfig, error) {
	d := engine.DefaultCleanerConfig
	enable := flags.Bool("log-cleaner-enable", true, "Kafka's log.cleaner.enable: compact topics with cleanup.policy=compact")
	threads := flags.Int("log-cleaner-threads", d.Threads, "Kafka's log.cleaner.threads")
	dedupe := flags.Int64("log-cleaner-dedupe-buffer-size", d.DedupeBufferBytes, "Kafka's log.cleaner.dedupe.buffer.size: bytes of the cleaners' offset maps")
	backoff := flags.Int64("log-cleaner-backoff-ms", d.Backoff.Milliseconds(), "Kafka's log.cleaner.backoff.ms: a cleaner's wait when no log needs cleaning")
	rate := flags.Float64("log-cleaner-io-max-bytes-per-second", 0, "Kafka's log.cleaner.io.max.bytes.per.second (0: unlimited)")
	return func() (engine.CleanerConfig, error) {
		switch {
		case *threads < 1 || *threads > 64:
			return d, fmt.Errorf("serve: --log-cleaner-threads %d out of range [1, 64]", *threads)
		case *dedupe < 1<<20:
			return d, fmt.Errorf("serve: --log-cleaner-dedupe-buffer-size %d below 1 MiB", *dedupe)
		case *backoff < 1:
			return d, fmt.Errorf("serve: --log-cleaner-backoff-ms %d below 1", *backoff)
		case *rate < 0:
			return d, fmt.Errorf("serve: --log-cleaner-io-max-bytes-per-second %v is negative", *rate)
		}
		d.Disabled, d.Threads, d.DedupeBufferBytes = !*enable, *threads, *dedupe
		d.Backoff, d.IOMaxBytesPerSecond = time.Duration(*backoff)*time.Millisecond, *rate
		return d, nil
	}
}
