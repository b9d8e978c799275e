module github.com/mirrord/mirrord

go 1.26.0

require (
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	golang.org/x/sys v0.50.0
)
