package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"

	"github.com/youmark/pkcs8"
)

// Kafka's PEM stores (ssl.truststore.type=PEM, ssl.keystore.type=PEM), read
// by the listener's TLS and by a mirror's source connection: a truststore of
// CA certificates, and a keystore holding a certificate chain and its
// private key, the key optionally encrypted with ssl.key.password as PKCS#8
// PBES2 (what `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes and Kafka reads).

// ReadTruststore reads a PEM file of CA certificates.
func ReadTruststore(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTruststore(data)
}

// ParseTruststore parses the PEM CA certificates of a truststore.
func ParseTruststore(data []byte) (*x509.CertPool, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data) {
		return nil, errors.New("no PEM certificate in the file")
	}
	return roots, nil
}

// ReadKeystore reads the certificate chain (CERTIFICATE blocks, the
// client's first) and the private key (PRIVATE KEY, RSA PRIVATE KEY, EC
// PRIVATE KEY or ENCRYPTED PRIVATE KEY) of a PEM keystore.
func ReadKeystore(path, password string) (tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tls.Certificate{}, err
	}
	return ParseKeystore(data, password)
}

// ParseKeystore parses a PEM keystore, as ReadKeystore.
func ParseKeystore(data []byte, password string) (tls.Certificate, error) {
	var certificates, key []byte
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		switch block.Type {
		case "CERTIFICATE":
			certificates = append(certificates, pem.EncodeToMemory(block)...)
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return tls.Certificate{}, errors.New("the private key is encrypted and ssl.key.password is not set")
			}
			der, err := decryptPKCS8(block.Bytes, password)
			if err != nil {
				return tls.Certificate{}, err
			}
			key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			if _, encrypted := block.Headers["DEK-Info"]; encrypted {
				return tls.Certificate{}, errors.New("legacy encrypted PEM keys are not supported: convert with openssl pkcs8 -topk8 -v2 aes-256-cbc")
			}
			key = pem.EncodeToMemory(block)
		}
	}
	if certificates == nil || key == nil {
		return tls.Certificate{}, errors.New("want a PEM certificate chain and a private key")
	}
	return tls.X509KeyPair(certificates, key)
}

// decryptPKCS8 decrypts an ENCRYPTED PRIVATE KEY (PKCS#8: PBES2 with
// PBKDF2 or scrypt, AES-CBC or 3DES, as github.com/youmark/pkcs8 reads
// them) to unencrypted PKCS#8 DER. A wrong password and a corrupt key are
// one error: the library does not tell them apart reliably.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	key, err := pkcs8.ParsePKCS8PrivateKey(der, []byte(password))
	if err != nil {
		return nil, errors.New("encrypted private key: ssl.key.password does not decrypt it, or it is not PKCS#8 PBES2")
	}
	return x509.MarshalPKCS8PrivateKey(key)
}
