package auth

// SASL/PLAIN (RFC 4616), as Kafka's PlainSaslServer with its
// PlainServerCallbackHandler: one token "authzid\x00username\x00password";
// the users and passwords are the user_<name>="<password>" options of the
// listener's PlainLoginModule JAAS config (or a users file); passwords
// compare in constant time.

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
)

// Plain is the PLAIN mechanism over a fixed set of users.
type Plain struct {
	users map[string][]byte // user -> password
}

// NewPlain returns PLAIN for users (name -> password).
func NewPlain(users map[string]string) *Plain {
	p := &Plain{users: make(map[string][]byte, len(users))}
	for name, password := range users {
		p.users[name] = []byte(password)
	}
	return p
}

func (*Plain) Name() string { return MechanismPlain }

func (p *Plain) NewExchange() SASLExchange { return &plainExchange{users: p.users} }

type plainExchange struct {
	users     map[string][]byte
	over      bool
	principal Principal
}

func (e *plainExchange) Step(token []byte) ([]byte, bool, error) {
	if e.over {
		return nil, false, invalidCredentials(MechanismPlain, errExchangeOver)
	}
	e.over = true
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, invalidCredentials(MechanismPlain, fmt.Errorf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts)))
	}
	authzid, username, password := parts[0], parts[1], parts[2]
	switch {
	case len(username) == 0:
		return nil, false, authenticationFailed("Authentication failed: username not specified")
	case len(password) == 0:
		return nil, false, authenticationFailed("Authentication failed: password not specified")
	}
	// Compare against a password of the same length for unknown users, so
	// an unknown user costs what a known one does.
	want, known := e.users[string(username)]
	if !known {
		want = make([]byte, len(password))
	}
	if subtle.ConstantTimeCompare(want, password) != 1 || !known {
		return nil, false, authenticationFailed("Authentication failed: Invalid username or password")
	}
	if len(authzid) > 0 && !bytes.Equal(authzid, username) {
		return nil, false, authenticationFailed("Authentication failed: Client requested an authorization id that is different from username")
	}
	e.principal = User(string(username))
	return []byte{}, true, nil
}

func (e *plainExchange) Principal() Principal { return e.principal }

// ErrJAAS is a sasl.jaas.config that does not parse or names the wrong
// login module.
var ErrJAAS = errors.New("auth: sasl.jaas.config")
