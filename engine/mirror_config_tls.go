package engine

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mirrord/mirrord/auth"
)

// The TLS client config of a mirror's source connection, from Kafka's PEM
// stores: ssl.truststore.location (CA certificates), ssl.keystore.location
// (certificate chain and private key, the key optionally encrypted with
// ssl.key.password as PKCS#8 PBES2: what `openssl pkcs8 -topk8 -v2
// aes-256-cbc` writes and Kafka reads) and
// ssl.endpoint.identification.algorithm.

// clientConfig reads the PEM files. Errors wrap kerr.InvalidConfig and name
// the key.
func (t MirrorTLS) clientConfig() (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.TruststoreLocation != "" {
		roots, err := auth.ReadTruststore(t.TruststoreLocation)
		if err != nil {
			return nil, mirrorTLSError("ssl.truststore.location", t.TruststoreLocation, err)
		}
		config.RootCAs = roots
	}
	if t.KeystoreLocation != "" {
		certificate, err := auth.ReadKeystore(t.KeystoreLocation, t.KeyPassword)
		if err != nil {
			return nil, mirrorTLSError("ssl.keystore.location", t.KeystoreLocation, err)
		}
		config.Certificates = []tls.Certificate{certificate}
	}
	if !t.EndpointIdentification {
		// Verify the chain, not the host name: Go checks both or neither.
		config.InsecureSkipVerify = true
		config.VerifyConnection = verifyChainOnly(config.RootCAs)
	}
	return config, nil
}

func mirrorTLSError(key, value string, err error) error {
	return fmt.Errorf("%w: mirror config %s=%q: %w", kerr.InvalidConfig, key, value, err)
}

// verifyChainOnly verifies the peer's chain against roots (nil: the
// system's) without checking the host name.
func verifyChainOnly(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(state tls.ConnectionState) error {
		if len(state.PeerCertificates) == 0 {
			return errors.New("engine: the source broker sent no certificate")
		}
		intermediates := x509.NewCertPool()
		for _, c := range state.PeerCertificates[1:] {
			intermediates.AddCert(c)
		}
		_, err := state.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates})
		return err
	}
}
