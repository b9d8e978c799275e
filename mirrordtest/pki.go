package mirrordtest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a test certificate authority whose certificates and keys are
// PEM files in a directory: what an SSL listener (ssl.keystore.location,
// ssl.truststore.location) and its clients (kcat's ssl.*.location, a Go
// tls.Config) read. Keys are P-256; certificates are valid for an hour
// either side of now.
type PKI struct {
	t      testing.TB
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
	// Truststore is the CA certificate's PEM file.
	Truststore string
}

// KeyPair is one issued certificate: the certificate and its key apart
// (as kcat takes them) and together (a PEM keystore).
type KeyPair struct {
	Cert, Key, Keystore string
	CertPEM             []byte // the certificate, as Cert holds it
	TLS                 tls.Certificate
}

// NewPKI makes a CA named commonName in a temporary directory of t.
func NewPKI(t testing.TB, commonName string) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{t: t, dir: t.TempDir(), caKey: key, serial: 1}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: commonName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	p.Truststore = p.Write("ca.pem", pemBlock("CERTIFICATE", der))
	return p
}

// Pool is the CA as a certificate pool.
func (p *PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	return pool
}

// Issue signs a certificate for subject, for server and client use,
// naming hosts (IP addresses or DNS names), and writes it as name.crt,
// name.key and name.pem (both).
func (p *PKI) Issue(name string, subject pkix.Name, hosts ...string) KeyPair {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.IssueFor(name, subject, key, hosts...)
}

// IssueFor is Issue for a key of the caller's (KeyPEM's, say, whose
// encrypted forms make an encrypted keystore).
func (p *PKI) IssueFor(name string, subject pkix.Name, key crypto.Signer, hosts ...string) KeyPair {
	p.t.Helper()
	p.serial++
	template := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, host := range hosts {
		if ip := net.ParseIP(host); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, host)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, p.ca, key.Public(), p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	certPEM, keyPEM := pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		p.t.Fatal(err)
	}
	return KeyPair{Cert: p.Write(name+".crt", certPEM), Key: p.Write(name+".key", keyPEM),
		Keystore: p.Write(name+".pem", certPEM, keyPEM), CertPEM: certPEM, TLS: pair}
}

// Dir is the directory of the CA's files.
func (p *PKI) Dir() string { return p.dir }

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// Write writes parts, one after the other, to the file name in Dir and
// returns its path.
func (p *PKI) Write(name string, parts ...[]byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, bytes.Join(parts, nil), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}
