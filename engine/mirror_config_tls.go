package engine

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mirrord/mirrord/auth"
)

// The TLS client config of a mirror's source connection, from Kafka's PEM
// stores: ssl.truststore.location (CA certificates), ssl.keystore.location
// (certificate chain and private key, the key optionally encrypted with
// ssl.key.password as PKCS#8 PBES2: what `openssl pkcs8 -topk8 -v2
// aes-256-cbc` writes and Kafka reads) and
// ssl.endpoint.identification.algorithm.

// clientConfig reads the PEM files, inside filesDir unless it is empty
// (readConfigFile). Errors name the key.
func (t MirrorTLS) clientConfig(filesDir string, log *slog.Logger) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.TruststoreLocation != "" {
		data, err := readConfigFile(filesDir, "ssl.truststore.location", t.TruststoreLocation, log)
		if err != nil {
			return nil, err
		}
		roots, err := auth.ParseTruststore(data)
		if err != nil {
			return nil, configFileContentError(filesDir, "ssl.truststore.location", "a PEM truststore", err, log)
		}
		config.RootCAs = roots
	}
	if t.KeystoreLocation != "" {
		data, err := readConfigFile(filesDir, "ssl.keystore.location", t.KeystoreLocation, log)
		if err != nil {
			return nil, err
		}
		certificate, err := auth.ParseKeystore(data, t.KeyPassword)
		if err != nil {
			return nil, configFileContentError(filesDir, "ssl.keystore.location", "a PEM keystore", err, log)
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

// configFileMax bounds a PEM file read.
const configFileMax = 4 << 20

// readConfigFile reads the file a config key names. With a files
// directory (mirror.config.files.dir) the path, relative to it or
// absolute, must lie inside it: checked lexically first (no ".."), then
// opened through an os.Root, which refuses a symbolic link that leads out.
// The error names the key and says the file cannot be read, never why
// (no such file, a directory, no permission, outside by a link); log gets
// why.
func readConfigFile(filesDir, key, path string, log *slog.Logger) ([]byte, error) {
	data, err := readConfigFileIn(filesDir, path)
	if errors.Is(err, errOutsideFilesDir) {
		return nil, fmt.Errorf("%s: the path is not inside the node's mirror.config.files.dir", key)
	}
	if err != nil {
		logger(log).Warn("cannot read a file a client config names", "key", key, "path", path, "error", err)
		return nil, fmt.Errorf("%s: the file cannot be read", key)
	}
	return data, nil
}

var errOutsideFilesDir = errors.New("outside the files directory")

func readConfigFileIn(filesDir, path string) ([]byte, error) {
	if filesDir == "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readConfigFileFrom(f)
	}
	dir, err := filepath.Abs(filesDir)
	if err != nil {
		return nil, err
	}
	name := path
	if filepath.IsAbs(path) {
		if name, err = filepath.Rel(dir, filepath.Clean(path)); err != nil {
			return nil, errOutsideFilesDir
		}
	}
	if !filepath.IsLocal(name) {
		return nil, errOutsideFilesDir
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readConfigFileFrom(f)
}

func readConfigFileFrom(f *os.File) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, configFileMax+1))
	if err == nil && len(data) > configFileMax {
		err = fmt.Errorf("longer than %d bytes", configFileMax)
	}
	return data, err
}

// configFileContentError is the error for a file that was read but is not
// what the key wants. Inside the node's files directory the file is the
// operator's and the reason is shown; without one it may be any file of
// the node's host, and the error says only that it is not what.
func configFileContentError(filesDir, key, what string, err error, log *slog.Logger) error {
	if filesDir != "" {
		return fmt.Errorf("%s: %w", key, err)
	}
	logger(log).Warn("a file a client config names is not "+what, "key", key, "error", err)
	return fmt.Errorf("%s: the file cannot be read as %s", key, what)
}

func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.Default()
	}
	return log
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
