package auth

import (
	"fmt"
	"strings"
)

// SecurityProtocol is Kafka's security.protocol, of a listener or of a
// client connection.
type SecurityProtocol int8

const (
	Plaintext SecurityProtocol = iota
	SSL
	SASLPlaintext
	SASLSSL
	securityProtocolCount
)

var securityProtocolNames = [securityProtocolCount]string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

func (p SecurityProtocol) String() string {
	if p < 0 || p >= securityProtocolCount {
		return fmt.Sprintf("SecurityProtocol(%d)", p)
	}
	return securityProtocolNames[p]
}

// UsesTLS: SSL and SASL_SSL.
func (p SecurityProtocol) UsesTLS() bool { return p == SSL || p == SASLSSL }

// UsesSASL: SASL_PLAINTEXT and SASL_SSL.
func (p SecurityProtocol) UsesSASL() bool { return p == SASLPlaintext || p == SASLSSL }

// ParseSecurityProtocol parses a protocol name, in any case as Kafka does.
func ParseSecurityProtocol(name string) (SecurityProtocol, error) {
	for i, known := range securityProtocolNames {
		if strings.EqualFold(known, name) {
			return SecurityProtocol(i), nil
		}
	}
	return 0, fmt.Errorf("auth: security protocol %q: want one of %s", name, strings.Join(securityProtocolNames[:], ", "))
}
