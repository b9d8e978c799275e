package engine

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/mirrordtest"
)

// serveTLSOnce accepts one TLS connection requiring a client certificate
// of pki, with a server certificate naming names, and returns its address
// and the server's handshake result.
func serveTLSOnce(t *testing.T, pki *mirrordtest.PKI, names ...string) (string, <-chan error) {
	server := pki.Issue("server", pkix.Name{CommonName: "server"}, names...)
	listener, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{server.TLS},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Pool()})
	if err != nil {
		t.Fatal(err)
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
	pki := mirrordtest.NewPKI(t, "test CA")
	clientCertificate := pki.IssueFor("client", pkix.Name{CommonName: "test"}, testKey(t), "mirrord").CertPEM
	truststore := pki.Truststore
	keystore := pki.Write("client-encrypted.pem", clientCertificate, []byte(mirrordtest.KeyAES256PEM))
	otherCA := mirrordtest.NewPKI(t, "other CA")
	for _, c := range []struct {
		name        string
		tls         MirrorTLS
		serverNames []string
		wantErr     bool
	}{
		{"verified", MirrorTLS{truststore, keystore, "secret", true}, []string{"127.0.0.1"}, false},
		{"wrong host", MirrorTLS{truststore, keystore, "secret", true}, []string{"other.example"}, true},
		{"wrong host unchecked", MirrorTLS{truststore, keystore, "secret", false}, []string{"other.example"}, false},
		{"untrusted", MirrorTLS{otherCA.Truststore, keystore, "secret", false}, []string{"127.0.0.1"}, true},
		{"no client certificate", MirrorTLS{TruststoreLocation: truststore, EndpointIdentification: true}, []string{"127.0.0.1"}, true},
	} {
		config, err := c.tls.clientConfig("", nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		address, served := serveTLSOnce(t, pki, c.serverNames...)
		err = dialWith(config, address)
		serverErr := <-served
		t.Logf("%s: client %v, server %v", c.name, err, serverErr)
		if got := err != nil || serverErr != nil; got != c.wantErr {
			t.Errorf("%s: client %v, server %v; want an error %t", c.name, err, serverErr, c.wantErr)
		}
	}
}

func TestMirrorConfigTLSFiles(t *testing.T) {
	pki := mirrordtest.NewPKI(t, "test CA")
	certificate := pki.IssueFor("client", pkix.Name{CommonName: "test"}, testKey(t), "mirrord").CertPEM
	truststore := pki.Truststore
	os.Mkdir(filepath.Join(pki.Dir(), "subdir"), 0o755)
	outside := mirrordtest.NewPKI(t, "outside CA").Truststore
	os.Symlink(outside, filepath.Join(pki.Dir(), "link.pem"))
	unreadable := "cannot be read"
	for _, c := range []struct {
		name     string
		filesDir string // mirror.config.files.dir; "" for anywhere
		tls      MirrorTLS
		want     string
	}{
		// Inside the node's files directory, the file is the
		// operator's: the reason is shown.
		{"missing truststore", pki.Dir(), MirrorTLS{TruststoreLocation: "none.pem"}, "ssl.truststore.location: the file cannot be read"},
		{"truststore a directory", pki.Dir(), MirrorTLS{TruststoreLocation: "subdir"}, "ssl.truststore.location: the file cannot be read"},
		{"empty truststore", pki.Dir(), MirrorTLS{TruststoreLocation: pki.Write("empty.pem")}, "no PEM certificate"},
		{"no key", pki.Dir(), MirrorTLS{KeystoreLocation: pki.Write("cert.pem", certificate)}, "want a PEM certificate chain and a private key"},
		{"no password", pki.Dir(), MirrorTLS{KeystoreLocation: pki.Write("enc.pem", certificate, []byte(mirrordtest.KeyAES128PEM))}, "ssl.key.password is not set"},
		{"wrong password", pki.Dir(), MirrorTLS{KeystoreLocation: pki.Write("enc.pem", certificate, []byte(mirrordtest.KeyAES128PEM)), KeyPassword: "x"}, "does not decrypt"},
		{"plain key", pki.Dir(), MirrorTLS{TruststoreLocation: "ca.pem", KeystoreLocation: pki.Write("plain.pem", certificate, []byte(mirrordtest.KeyPEM))}, ""},
		{"dot dot", pki.Dir(), MirrorTLS{TruststoreLocation: "../ca.pem"}, "ssl.truststore.location: the path is not inside the node's mirror.config.files.dir"},
		{"absolute outside", pki.Dir(), MirrorTLS{TruststoreLocation: outside}, "ssl.truststore.location: the path is not inside"},
		{"symlink out", pki.Dir(), MirrorTLS{TruststoreLocation: "link.pem"}, "ssl.truststore.location: the file cannot be read"},
		{"clean path inside", pki.Dir(), MirrorTLS{TruststoreLocation: "subdir/../ca.pem"}, ""},
		// Anywhere: the file may be any of the host's, and every
		// failure reads the same.
		{"anywhere: missing", "", MirrorTLS{TruststoreLocation: pki.Dir() + "/none.pem"}, unreadable},
		{"anywhere: a directory", "", MirrorTLS{TruststoreLocation: pki.Dir()}, unreadable},
		{"anywhere: not PEM", "", MirrorTLS{TruststoreLocation: pki.Write("empty.pem")}, "ssl.truststore.location: the file cannot be read as a PEM truststore"},
		{"anywhere: wrong password", "", MirrorTLS{KeystoreLocation: pki.Write("enc.pem", certificate, []byte(mirrordtest.KeyAES128PEM)), KeyPassword: "x"},
			"ssl.keystore.location: the file cannot be read as a PEM keystore"},
		{"anywhere: symlink out", "", MirrorTLS{TruststoreLocation: filepath.Join(pki.Dir(), "link.pem")}, ""},
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
	c.Security.TLS.TruststoreLocation = pki.Dir() + "/none.pem"
	if _, err := c.SourceClientOptions("", nil); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("missing truststore: %v", err)
	}
}

// testKey is mirrordtest.KeyPEM's key, whose encrypted forms make the
// encrypted keystores.
func testKey(t *testing.T) crypto.Signer {
	t.Helper()
	block, _ := pem.Decode([]byte(mirrordtest.KeyPEM))
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return key.(crypto.Signer)
}
