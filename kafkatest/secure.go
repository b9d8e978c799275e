package kafkatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A SASL_SSL listener beside each broker's PLAINTEXT one (which the
// cluster's own probes, inter-broker traffic and the tools keep using):
// TLS with a PEM keystore of a test CA's certificate for 127.0.0.1, and
// SCRAM users created when the storage is formatted (kafka-storage format
// --add-scram), so they exist before the broker serves. Tests that need
// ACLs add the authorizer through Options.Config
// (authorizer.class.name, super.users); the listener's principal is
// User:<name>.

// ScramUser is a SCRAM credential created at format time.
type ScramUser struct {
	Mechanism string // SCRAM-SHA-256 or SCRAM-SHA-512
	Name      string
	Password  string
}

// SASLSSL configures the SASL_SSL listener (Options.SASLSSL).
type SASLSSL struct {
	// KeystoreLocation is the brokers' PEM keystore (certificate chain and
	// unencrypted PKCS#8 key); TruststoreLocation the CA's certificate,
	// for clients. NewSASLSSL writes both.
	KeystoreLocation, TruststoreLocation string
	Users                                []ScramUser // at least one
}

// NewSASLSSL writes a test CA and a broker certificate for 127.0.0.1
// (valid for a day) into dir and returns the listener's setup with users.
func NewSASLSSL(dir string, users ...ScramUser) (*SASLSSL, error) {
	if len(users) == 0 {
		return nil, fmt.Errorf("kafkatest: a SASL_SSL listener needs a SCRAM user")
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafkatest CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, NotBefore: notBefore, NotAfter: notAfter}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kafkatest broker"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	s := &SASLSSL{KeystoreLocation: filepath.Join(dir, "broker-keystore.pem"), TruststoreLocation: filepath.Join(dir, "ca.pem"), Users: users}
	keystore := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(s.KeystoreLocation, keystore, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.TruststoreLocation, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, err
	}
	return s, nil
}

// mechanisms are the SCRAM mechanisms of the users, sorted.
func (s *SASLSSL) mechanisms() []string {
	var mechanisms []string
	for _, u := range s.Users {
		if !slices.Contains(mechanisms, u.Mechanism) {
			mechanisms = append(mechanisms, u.Mechanism)
		}
	}
	slices.Sort(mechanisms)
	return mechanisms
}

// formatArgs are the kafka-storage format arguments creating the users.
func (s *SASLSSL) formatArgs() []string {
	var args []string
	for _, u := range s.Users {
		args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", u.Mechanism, u.Name, u.Password))
	}
	return args
}

// addProperties adds the SASL_SSL listener at addr to a broker's
// properties.
func (s *SASLSSL) addProperties(props map[string]string, addr string) {
	props["listeners"] += ",SASL_SSL://" + addr
	props["advertised.listeners"] += ",SASL_SSL://" + addr
	props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
	props["sasl.enabled.mechanisms"] = strings.Join(s.mechanisms(), ",")
	for _, m := range s.mechanisms() {
		props["listener.name.sasl_ssl."+strings.ToLower(m)+".sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	}
	props["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM"
	props["listener.name.sasl_ssl.ssl.keystore.location"] = s.KeystoreLocation
}

// JAASConfig is the client's sasl.jaas.config for user u.
func (u ScramUser) JAASConfig() string {
	return fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, u.Name, u.Password)
}

// SSL configures an SSL listener beside each broker's PLAINTEXT one
// (Options.SSL): TLS alone, no SASL; the principal is the client
// certificate's subject, or ANONYMOUS without one.
type SSL struct {
	// KeystoreLocation is the brokers' PEM keystore (certificate chain
	// and unencrypted PKCS#8 key, for 127.0.0.1); TruststoreLocation the
	// PEM CA certificates client certificates must chain to, "" for none.
	KeystoreLocation, TruststoreLocation string
	ClientAuth                           string // ssl.client.auth: required, requested or none ("": none)
}

// addProperties adds the SSL listener at addr to a broker's properties.
func (s *SSL) addProperties(props map[string]string, addr string) {
	props["listeners"] += ",SSL://" + addr
	props["advertised.listeners"] += ",SSL://" + addr
	props["listener.security.protocol.map"] += ",SSL:SSL"
	props["listener.name.ssl.ssl.keystore.type"] = "PEM"
	props["listener.name.ssl.ssl.keystore.location"] = s.KeystoreLocation
	if s.TruststoreLocation != "" {
		props["listener.name.ssl.ssl.truststore.type"] = "PEM"
		props["listener.name.ssl.ssl.truststore.location"] = s.TruststoreLocation
	}
	if s.ClientAuth != "" {
		props["listener.name.ssl.ssl.client.auth"] = s.ClientAuth
	}
}
