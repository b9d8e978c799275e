package engine

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A P-256 key, plain and encrypted with password "secret" by OpenSSL 3:
//
//	openssl pkcs8 -topk8 -v2 aes-256-cbc -v2prf hmacWithSHA256 -iter 2048 -passout pass:secret
//	openssl pkcs8 -topk8 -v2 aes-128-cbc -v2prf hmacWithSHA1 -iter 1000 -passout pass:secret
const (
	testKeyPEM = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaeCYOjBgS8N1I+m4
HINT026FJU35evM5JBHhp1fmbF+hRANCAAS51r8XjwO/NQ9rr+HGi1axyy15FAUL
LvBzHQH4rzRy4oNcmOWpwVHY2a9RiLdOIWRudjXjugltE4BaylFzxcd8
-----END PRIVATE KEY-----
`
	testKeyAES256PEM = `-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAj7WzeOoh23PwICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEJC2DO4d4LTy35p1T/IPOMEEgZAP
/Yv3XiyYDH9uBD0NzAL+lSIon7p6TV0efPpO1JP2pZwYcIPVCqUlIEOnHOo/a4Uz
vmGcQXzWm1E7zCizxnrFmudlmY+kwUpBZHAbDnxBZpCwFfO0MJYLlvjd1sbf2dsf
NcYq+dvZ5udPeFlPnGp7qDJGqBx/iZIXm6p/8Q/JCvGrtNtzRHEYOpWi9aMqnJA=
-----END ENCRYPTED PRIVATE KEY-----
`
	testKeyAES128PEM = `-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHeMEkGCSqGSIb3DQEFDTA8MBsGCSqGSIb3DQEFDDAOBAiUka5U/u6JCQICA+gw
HQYJYIZIAWUDBAECBBDrqawFE8pvw0GJ/b3z26w5BIGQvJazoTSWEaODBWyC2CqW
Ul8upFIPEYaOSj/Nk8DZKYGAepMphSmIJ1Q/C1NuB5wR1WB9IIjUMljVxa5B4qwa
nPE9pv7ZLtUqXRMx1YUiOREiC+aPAJcUmiZla1AKA1XUC4mpOJaqrTU8PTaDu4zI
UtL2+7BHvz1NSiwYlXhQW7GhqApr8d/8WxiBnASkBQHo
-----END ENCRYPTED PRIVATE KEY-----
`
)

func pemBytes(t *testing.T, text string) []byte {
	t.Helper()
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

// testPKI is a CA and certificates it signed, as PEM files in a directory.
type testPKI struct {
	t    *testing.T
	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func newTestPKI(t *testing.T) *testPKI {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{t: t, dir: t.TempDir(), key: key, next: 2}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	return p
}

// issue signs a certificate for public, naming the IP addresses or host names.
func (p *testPKI) issue(public any, names ...string) []byte {
	p.next++
	template := &x509.Certificate{SerialNumber: big.NewInt(p.next), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, name := range names {
		if ip := net.ParseIP(name); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, name)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, p.ca, public, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (p *testPKI) write(name string, parts ...[]byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, bytes.Join(parts, nil), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

func (p *testPKI) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw})
}

// serve accepts one TLS connection requiring a client certificate of the
// CA, and returns its address and the server's handshake result.
func (p *testPKI) serve(names ...string) (string, <-chan error) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certificate, err := tls.X509KeyPair(p.issue(key.Public(), names...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		p.t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(p.ca)
	listener, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{certificate},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs})
	if err != nil {
		p.t.Fatal(err)
	}
	result := make(chan error, 1)
	go func() {
		defer listener.Close()
		conn, err := listener.Accept()
		if err != nil {
			result <- err
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		err = conn.(*tls.Conn).Handshake()
		if err == nil && len(conn.(*tls.Conn).ConnectionState().PeerCertificates) != 1 {
			err = errors.New("no client certificate")
		}
		if err == nil {
			_, err = conn.Write([]byte{1}) // the client reads it: the handshake is over on both sides
		}
		result <- err
	}()
	return listener.Addr().String(), result
}

// dial connects with config as kgo would (ServerName from the address).
func dialWith(config *tls.Config, address string) error {
	config = config.Clone()
	config.ServerName, _, _ = net.SplitHostPort(address)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", address, config)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

func TestMirrorConfigTLS(t *testing.T) {
	pki := newTestPKI(t)
	clientKey, err := x509.ParsePKCS8PrivateKey(pemBytes(t, testKeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	clientCertificate := pki.issue(clientKey.(*ecdsa.PrivateKey).Public(), "mirrord")
	truststore := pki.write("ca.pem", pki.caPEM())
	keystore := pki.write("client.pem", clientCertificate, []byte(testKeyAES256PEM))
	otherCA := newTestPKI(t)
	for _, c := range []struct {
		name        string
		tls         MirrorTLS
		serverNames []string
		wantErr     bool
	}{
		{"verified", MirrorTLS{truststore, keystore, "secret", true}, []string{"127.0.0.1"}, false},
		{"wrong host", MirrorTLS{truststore, keystore, "secret", true}, []string{"other.example"}, true},
		{"wrong host unchecked", MirrorTLS{truststore, keystore, "secret", false}, []string{"other.example"}, false},
		{"untrusted", MirrorTLS{otherCA.write("ca.pem", otherCA.caPEM()), keystore, "secret", false}, []string{"127.0.0.1"}, true},
		{"no client certificate", MirrorTLS{TruststoreLocation: truststore, EndpointIdentification: true}, []string{"127.0.0.1"}, true},
	} {
		config, err := c.tls.clientConfig("", nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		address, served := pki.serve(c.serverNames...)
		err = dialWith(config, address)
		serverErr := <-served
		t.Logf("%s: client %v, server %v", c.name, err, serverErr)
		if got := err != nil || serverErr != nil; got != c.wantErr {
			t.Errorf("%s: client %v, server %v; want an error %t", c.name, err, serverErr, c.wantErr)
		}
	}
}

func TestMirrorConfigTLSFiles(t *testing.T) {
	pki := newTestPKI(t)
	clientKey, _ := x509.ParsePKCS8PrivateKey(pemBytes(t, testKeyPEM))
	certificate := pki.issue(clientKey.(*ecdsa.PrivateKey).Public(), "mirrord")
	truststore := pki.write("ca.pem", pki.caPEM())
	os.Mkdir(filepath.Join(pki.dir, "subdir"), 0o755)
	outside := newTestPKI(t).write("ca.pem", pki.caPEM())
	os.Symlink(outside, filepath.Join(pki.dir, "link.pem"))
	unreadable := "cannot be read"
	for _, c := range []struct {
		name     string
		filesDir string // mirror.config.files.dir; "" for anywhere
		tls      MirrorTLS
		want     string
	}{
		// Inside the node's files directory, the file is the
		// operator's: the reason is shown.
		{"missing truststore", pki.dir, MirrorTLS{TruststoreLocation: "none.pem"}, "ssl.truststore.location: the file cannot be read"},
		{"truststore a directory", pki.dir, MirrorTLS{TruststoreLocation: "subdir"}, "ssl.truststore.location: the file cannot be read"},
		{"empty truststore", pki.dir, MirrorTLS{TruststoreLocation: pki.write("empty.pem")}, "no PEM certificate"},
		{"no key", pki.dir, MirrorTLS{KeystoreLocation: pki.write("cert.pem", certificate)}, "want a PEM certificate chain and a private key"},
		{"no password", pki.dir, MirrorTLS{KeystoreLocation: pki.write("enc.pem", certificate, []byte(testKeyAES128PEM))}, "ssl.key.password is not set"},
		{"wrong password", pki.dir, MirrorTLS{KeystoreLocation: pki.write("enc.pem", certificate, []byte(testKeyAES128PEM)), KeyPassword: "x"}, "does not decrypt"},
		{"plain key", pki.dir, MirrorTLS{TruststoreLocation: "ca.pem", KeystoreLocation: pki.write("plain.pem", certificate, []byte(testKeyPEM))}, ""},
		{"dot dot", pki.dir, MirrorTLS{TruststoreLocation: "../ca.pem"}, "ssl.truststore.location: the path is not inside the node's mirror.config.files.dir"},
		{"absolute outside", pki.dir, MirrorTLS{TruststoreLocation: outside}, "ssl.truststore.location: the path is not inside"},
		{"symlink out", pki.dir, MirrorTLS{TruststoreLocation: "link.pem"}, "ssl.truststore.location: the file cannot be read"},
		{"clean path inside", pki.dir, MirrorTLS{TruststoreLocation: "subdir/../ca.pem"}, ""},
		// Anywhere: the file may be any of the host's, and every
		// failure reads the same.
		{"anywhere: missing", "", MirrorTLS{TruststoreLocation: pki.dir + "/none.pem"}, unreadable},
		{"anywhere: a directory", "", MirrorTLS{TruststoreLocation: pki.dir}, unreadable},
		{"anywhere: not PEM", "", MirrorTLS{TruststoreLocation: pki.write("empty.pem")}, "ssl.truststore.location: the file cannot be read as a PEM truststore"},
		{"anywhere: wrong password", "", MirrorTLS{KeystoreLocation: pki.write("enc.pem", certificate, []byte(testKeyAES128PEM)), KeyPassword: "x"},
			"ssl.keystore.location: the file cannot be read as a PEM keystore"},
		{"anywhere: symlink out", "", MirrorTLS{TruststoreLocation: filepath.Join(pki.dir, "link.pem")}, ""},
	} {
		_, err := c.tls.clientConfig(c.filesDir, nil)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		case err != nil && (strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "directory") && !strings.Contains(err.Error(), "files.dir")):
			t.Errorf("%s: %v tells why the file cannot be read", c.name, err)
		}
	}
	c, err := ParseMirrorConfig(map[string]string{"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
		"ssl.truststore.location": truststore})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.SourceClientOptions("", nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	client.Close()
	c.Security.TLS.TruststoreLocation = pki.dir + "/none.pem"
	if _, err := c.SourceClientOptions("", nil); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("missing truststore: %v", err)
	}
}
