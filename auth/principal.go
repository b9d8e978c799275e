package auth

import (
	"errors"
	"fmt"
	"strings"
)

// Principal is Kafka's KafkaPrincipal: a type (always "User" for the
// principals a listener builds) and a name.
type Principal struct {
	Type, Name string
}

// UserType is the principal type of every authenticated client.
const UserType = "User"

// Anonymous is the principal of a PLAINTEXT or SSL connection without a
// client certificate, as Kafka names it.
var Anonymous = Principal{Type: UserType, Name: "ANONYMOUS"}

// User returns the User principal called name.
func User(name string) Principal { return Principal{Type: UserType, Name: name} }

// String is Kafka's form, "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ErrPrincipal is a principal string that is not TYPE:NAME.
var ErrPrincipal = errors.New("auth: principal must be TYPE:NAME")

// ParsePrincipal parses Kafka's "User:alice" (the name may hold colons).
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" {
		return Principal{}, fmt.Errorf("%w: %q", ErrPrincipal, s)
	}
	return Principal{Type: typ, Name: name}, nil
}
