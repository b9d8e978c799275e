package auth

import (
	"bytes"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/mirrordtest"
)

func pemBytes(t *testing.T, text string) []byte {
	t.Helper()
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

func TestMirrorConfigDecryptPKCS8(t *testing.T) {
	want := pemBytes(t, mirrordtest.KeyPEM)
	for _, encrypted := range []string{mirrordtest.KeyAES256PEM, mirrordtest.KeyAES128PEM} {
		got, err := decryptPKCS8(pemBytes(t, encrypted), "secret")
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("decrypted %x, %v", got, err)
		}
		if _, err := decryptPKCS8(pemBytes(t, encrypted), "wrong"); err == nil || !strings.Contains(err.Error(), "ssl.key.password") {
			t.Fatalf("wrong password: %v", err)
		}
	}
	if _, err := decryptPKCS8([]byte{0x30, 0x03, 0x02, 0x01, 0x01}, "secret"); err == nil {
		t.Fatal("garbage decrypted")
	}
}
