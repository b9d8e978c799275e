package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
)

// Kafka's PEM stores (ssl.truststore.type=PEM, ssl.keystore.type=PEM), read
// by the listener's TLS and by a mirror's source connection: a truststore of
// CA certificates, and a keystore holding a certificate chain and its
// private key, the key optionally encrypted with ssl.key.password as PKCS#8
// PBES2 (what `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes and Kafka reads).

// pbkdf2IterationsMax bounds the key derivation work an encrypted key may
// ask for.
const pbkdf2IterationsMax = 10_000_000

// ReadTruststore reads a PEM file of CA certificates.
func ReadTruststore(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
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

var (
	oidPBES2          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACWithSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACWithSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC      = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC      = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC      = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

// RFC 5208 and RFC 8018 structures.
type encryptedPrivateKeyInfo struct {
	Algorithm     pkix.AlgorithmIdentifier
	EncryptedData []byte
}

type pbes2Parameters struct {
	KeyDerivationFunc pkix.AlgorithmIdentifier
	EncryptionScheme  pkix.AlgorithmIdentifier
}

type pbkdf2Parameters struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                      `asn1:"optional"`
	PRF            pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts an ENCRYPTED PRIVATE KEY (PBES2: PBKDF2 with
// HMAC-SHA1/256/512, AES-CBC) to PKCS#8 DER.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	var params pbes2Parameters
	var kdf pbkdf2Parameters
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key: scheme %v is not PBES2", info.Algorithm.Algorithm)
	}
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBES2 parameters: %w", err)
	}
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted private key: key derivation %v is not PBKDF2", params.KeyDerivationFunc.Algorithm)
	}
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBKDF2 parameters: %w", err)
	}
	keyLength, iv, err := aesCBCParameters(params.EncryptionScheme)
	if err != nil {
		return nil, err
	}
	prf, err := pbkdf2PRF(kdf.PRF.Algorithm)
	if err != nil {
		return nil, err
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > pbkdf2IterationsMax || kdf.KeyLength != 0 && kdf.KeyLength != keyLength {
		return nil, fmt.Errorf("encrypted private key: %d iterations, key length %d", kdf.IterationCount, kdf.KeyLength)
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.IterationCount, keyLength)
	if err != nil {
		return nil, err
	}
	return decryptAESCBC(key, iv, info.EncryptedData)
}

// aesCBCParameters returns the key length and IV of an AES-CBC scheme.
func aesCBCParameters(scheme pkix.AlgorithmIdentifier) (int, []byte, error) {
	keyLength := 0
	switch {
	case scheme.Algorithm.Equal(oidAES128CBC):
		keyLength = 16
	case scheme.Algorithm.Equal(oidAES192CBC):
		keyLength = 24
	case scheme.Algorithm.Equal(oidAES256CBC):
		keyLength = 32
	default:
		return 0, nil, fmt.Errorf("encrypted private key: cipher %v is not AES-CBC", scheme.Algorithm)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(scheme.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return 0, nil, errors.New("encrypted private key: bad AES-CBC IV")
	}
	return keyLength, iv, nil
}

func pbkdf2PRF(oid asn1.ObjectIdentifier) (func() hash.Hash, error) {
	switch {
	case len(oid) == 0 || oid.Equal(oidHMACWithSHA1):
		return sha1.New, nil
	case oid.Equal(oidHMACWithSHA256):
		return sha256.New, nil
	case oid.Equal(oidHMACWithSHA512):
		return sha512.New, nil
	}
	return nil, fmt.Errorf("encrypted private key: PRF %v is not HMAC-SHA1/256/512", oid)
}

// decryptAESCBC decrypts and removes the PKCS#7 padding; a wrong password
// shows as bad padding or, rarely, as a key that does not parse.
func decryptAESCBC(key, iv, data []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted private key: data is not whole AES blocks")
	}
	plain := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, data)
	padding := int(plain[len(plain)-1])
	wrong := errors.New("encrypted private key: ssl.key.password does not decrypt it")
	if padding < 1 || padding > aes.BlockSize {
		return nil, wrong
	}
	for _, b := range plain[len(plain)-padding:] {
		if int(b) != padding {
			return nil, wrong
		}
	}
	plain = plain[:len(plain)-padding]
	if _, err := x509.ParsePKCS8PrivateKey(plain); err != nil {
		return nil, wrong
	}
	return plain, nil
}
