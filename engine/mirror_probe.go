package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reachability check of CreateMirror: a mirror whose source cannot be
// reached (a typo in bootstrap.servers, a closed port, TLS against a
// plaintext listener) is refused with the reason in Kafka's terms, not
// created silent. A dropped connection is retried briefly first: one
// restart of the source must not fail a --create.
const (
	sourceProbeTimeout  = 10 * time.Second // the whole check, at most
	sourceProbeAttempts = 3
	sourceProbeBackoff  = 200 * time.Millisecond // doubled after each attempt
	sourceDiagnoseWait  = 3 * time.Second        // one diagnosing dial or handshake
)

// minSourceMetadataVersion is the first Metadata version with topic IDs.
const minSourceMetadataVersion = 10

// probeSource asks the source cluster for its metadata, up to
// sourceProbeAttempts times, and on failure says why.
func (m *mirror) probeSource(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(sourceProbeTimeout, m.config.RequestTimeout))
	defer cancel()
	bootstrap := strings.Join(m.config.BootstrapServers, ",")
	var resp kmsg.Response
	var err error
	backoff := sourceProbeBackoff
	for attempt := 1; attempt <= sourceProbeAttempts; attempt++ {
		if resp, err = m.client.Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil || ctx.Err() != nil {
			break
		}
		m.log.Info("source cluster did not answer; retrying", "source", bootstrap, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	if err != nil {
		if public := publicSourceError(err); public != errSourceUnreachable.Error() {
			return fmt.Errorf("%w: mirror %s: the source cluster at %s refused: %s", kerr.InvalidConfig, m.name, bootstrap, public)
		}
		m.log.Warn("cannot reach the source cluster", "source", bootstrap, "diagnosis", m.diagnoseSource(ctx, err), "error", err)
		return fmt.Errorf("%w: mirror %s: cannot reach the source cluster at %s: %w", kerr.InvalidConfig, m.name, bootstrap, errSourceUnreachable)
	}
	// Mirroring keys topics by ID and truncates on DivergingEpoch: the
	// source must answer Metadata v10+ (topic IDs, Kafka 2.8) and, for
	// fetching by ID, Fetch v13 (Kafka 3.1).
	if v := resp.GetVersion(); v < minSourceMetadataVersion {
		return fmt.Errorf("%w: mirror %s: the source cluster at %s answers Metadata v%d, without topic IDs: mirroring needs Kafka 3.1 or later", kerr.InvalidConfig, m.name, bootstrap, v)
	}
	return nil
}

// errSourceUnreachable is what a client is told of a source that does not
// answer, whatever the reason: a refused connection, a timeout, a name
// that does not resolve, a failed TLS handshake or a listener that is not
// Kafka's. Telling them apart would let any client of the node map the
// ports of hosts the node reaches; the node's log has the diagnosis.
var errSourceUnreachable = errors.New("no Kafka answer (refused, timed out, or not a Kafka listener of this security.protocol: the node's log says which)")

// publicSourceError is the text a client sees of a failed request to the
// source: a Kafka error code's text (the source answered, for example
// SASL_AUTHENTICATION_FAILED), else errSourceUnreachable's.
func publicSourceError(err error) string {
	var kafkaErr *kerr.Error
	if errors.As(err, &kafkaErr) {
		return kafkaErr.Error()
	}
	if errors.Is(err, errNoToken) || errors.Is(err, errAWSCredentials) {
		return err.Error()
	}
	return errSourceUnreachable.Error()
}

// diagnoseSource says, for the node's log, why the client's request failed with err: it dials
// the first bootstrap server itself and, for SSL and SASL_SSL, shakes
// hands, so that a refused connection, a timeout, a name that does not
// resolve and a TLS failure are named as such (the client's own error is
// often only its deadline). It runs after the probe's own deadline may
// have passed, so it keeps ctx's values but not its deadline, and takes
// at most sourceDiagnoseWait.
func (m *mirror) diagnoseSource(ctx context.Context, clientErr error) string {
	address := m.config.BootstrapServers[0]
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sourceDiagnoseWait)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", address)
	if err != nil {
		return describeDialError(address, err)
	}
	defer conn.Close()
	if !m.config.Security.Protocol.UsesTLS() {
		var firstRead *kgo.ErrFirstReadEOF
		switch {
		case errors.As(clientErr, &firstRead):
			return fmt.Sprintf("%s accepts connections but closed the connection after the first request: does it need TLS or SASL (security.protocol is %s)?", address, m.config.Security.Protocol)
		case errors.Is(clientErr, context.DeadlineExceeded):
			return fmt.Sprintf("%s accepts connections but did not answer a Kafka request in time: is it a Kafka listener, and does it need TLS (security.protocol is %s)?", address, m.config.Security.Protocol)
		}
		return clientErr.Error()
	}
	config, err := m.config.Security.TLS.clientConfig(m.node.cfg.MirrorConfigFilesDir, m.log)
	if err != nil {
		return err.Error()
	}
	if config.ServerName == "" {
		config.ServerName, _, _ = net.SplitHostPort(address)
	}
	if err := tls.Client(conn, config).HandshakeContext(ctx); err != nil {
		return describeHandshakeError(address, err)
	}
	return clientErr.Error()
}

// describeDialError names why a TCP connection to address failed.
func describeDialError(address string, err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("connection to %s refused: nothing listens there", address)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("host of %s does not resolve: %v", address, dnsErr)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("connection to %s timed out after %v: no answer (a wrong address, or a firewall)", address, sourceDiagnoseWait)
	}
	return fmt.Sprintf("connection to %s failed: %v", address, err)
}

// describeHandshakeError names why a TLS handshake with address failed.
func describeHandshakeError(address string, err error) string {
	var header tls.RecordHeaderError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &header), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("TLS handshake with %s failed (%v): it does not answer TLS; is it a PLAINTEXT listener (security.protocol=SSL needs an SSL one)?", address, err)
	case errors.As(err, &unknownAuthority):
		return fmt.Sprintf("TLS handshake with %s failed: its certificate is not signed by a CA of ssl.truststore.location (%v)", address, err)
	case errors.As(err, &hostname):
		return fmt.Sprintf("TLS handshake with %s failed: its certificate does not name the host (%v; ssl.endpoint.identification.algorithm= turns the check off)", address, err)
	case errors.As(err, &invalid):
		return fmt.Sprintf("TLS handshake with %s failed: its certificate is not valid (%v)", address, err)
	}
	return fmt.Sprintf("TLS handshake with %s failed: %v", address, err)
}
