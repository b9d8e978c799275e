package e2e

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/mirrordtest"
)

// TestKcatSSLClientCertificate: mirrord serves an SSL listener with
// ssl.client.auth=required beside its PLAINTEXT one; kcat with a client
// certificate produces and consumes over it and is told the SSL
// listener's address, and kcat without a certificate is refused.
func TestKcatSSLClientCertificate(t *testing.T) {
	t.Parallel()
	kcat := findKcat(t)
	pki := mirrordtest.NewPKI(t, "e2e CA")
	node := pki.Issue("node", pkix.Name{CommonName: "mirrord"}, "127.0.0.1")
	client := pki.Issue("client", pkix.Name{CommonName: "kcat", OrganizationalUnit: []string{"e2e"}})
	sslAddr, err := mirrordtest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--ssl-listen", sslAddr, "--ssl-keystore", node.Keystore, "--ssl-truststore", pki.Truststore,
		"--ssl-client-auth", "required", "--ssl-principal-mapping-rules", "RULE:^CN=([^,]+),.*$/$1/,DEFAULT")
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	const topic = "kcat-ssl"
	createTopics(ctx, t, s.addr, map[string]int32{topic: 1})
	ssl := []string{"-b", sslAddr, "-m", kcatMetadataTimeout, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + pki.Truststore}
	withCert := append(append([]string{}, ssl...), "-X", "ssl.certificate.location="+client.Cert, "-X", "ssl.key.location="+client.Key)

	metadata := runKcat(ctx, t, kcat, nil, append(withCert, "-L", "-J")...)
	if !bytes.Contains(metadata, []byte(fmt.Sprintf("%q", sslAddr))) {
		t.Fatalf("kcat -L over SSL: the broker is not the SSL listener's %s:\n%s", sslAddr, metadata)
	}
	var records bytes.Buffer
	for i := range kcatRecords {
		fmt.Fprintf(&records, "record %d over TLS %s\n", i, strings.Repeat("y", i%40))
	}
	runKcat(ctx, t, kcat, records.Bytes(), append(withCert, "-P", "-t", topic, "-p", "0", "-X", "message.timeout.ms="+kcatMessageTimeout)...)
	out := runKcat(ctx, t, kcat, nil, append(withCert, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\n")...)
	compareLines(t, "kcat -C over SSL", out, records.Bytes())

	// Without a certificate the handshake fails and kcat gets no metadata.
	refused, cancelRefused := context.WithTimeout(ctx, kcatWait)
	defer cancelRefused()
	cmd := exec.CommandContext(refused, kcat, append(ssl, "-m", "5", "-L")...)
	var stderr boundedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err == nil || refused.Err() != nil {
		t.Fatalf("kcat without a client certificate: %v (ctx %v), want a refusal\n%s", err, refused.Err(), stderr.Bytes())
	}
	if !bytes.Contains(stderr.Bytes(), []byte("ERROR")) {
		t.Fatalf("kcat without a client certificate says:\n%s", stderr.Bytes())
	}
}
