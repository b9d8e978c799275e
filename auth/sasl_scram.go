package auth

// SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's
// ScramSaslServer: client-first -> server-first (nonce, salt, iterations),
// client-final (proof) -> server-final (signature). The exchange is
// github.com/xdg-go/scram's server conversation over the node's
// ScramCredentials. Channel binding (the -PLUS mechanisms) is not offered,
// as Kafka offers none. An unknown user, a bad proof or a malformed
// message fail with Kafka's generic message, so the answer does not tell
// an unknown user from a wrong password; a credential below 4096
// iterations is refused as Kafka refuses it.

import (
	"errors"
	"fmt"

	"github.com/xdg-go/scram"
)

// Scram is one SCRAM mechanism over a credential store.
type Scram struct {
	name   string
	server *scram.Server
}

// NewScram returns SCRAM-SHA-256 or SCRAM-SHA-512 over store.
func NewScram(mechanism string, store *ScramCredentials) (*Scram, error) {
	var generator scram.HashGeneratorFcn
	switch mechanism {
	case MechanismScramSHA256:
		generator = scram.SHA256
	case MechanismScramSHA512:
		generator = scram.SHA512
	default:
		return nil, fmt.Errorf("%w: %q", ErrScramUnknownMechanism, mechanism)
	}
	server, err := generator.NewServer(func(user string) (scram.StoredCredentials, error) {
		c, ok := store.Lookup(mechanism, user)
		switch {
		case !ok:
			return scram.StoredCredentials{}, errors.New("Authentication failed: Invalid user credentials")
		case c.Iterations < ScramIterationsMin:
			return scram.StoredCredentials{}, fmt.Errorf("Iterations %d is less than the minimum %d for %s", c.Iterations, ScramIterationsMin, mechanism)
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", mechanism, err)
	}
	return &Scram{name: mechanism, server: server}, nil
}

func (s *Scram) Name() string { return s.name }

func (s *Scram) NewExchange() SASLExchange {
	return &scramExchange{name: s.name, conversation: s.server.NewConversation()}
}

type scramExchange struct {
	name         string
	conversation *scram.ServerConversation
	steps        int
	failed       bool
}

func (e *scramExchange) Step(token []byte) ([]byte, bool, error) {
	if e.failed || e.conversation.Done() {
		return nil, false, invalidCredentials(e.name, errExchangeOver)
	}
	e.steps++
	// The library's error answers (e=...) are not sent: Kafka fails the
	// exchange with SASL_AUTHENTICATION_FAILED instead.
	answer, err := e.conversation.Step(string(token))
	if err != nil {
		e.failed = true
		return nil, false, invalidCredentials(e.name, err)
	}
	if e.steps == 1 {
		if authzid := e.conversation.AuthzID(); authzid != "" && authzid != e.conversation.Username() {
			e.failed = true
			return nil, false, authenticationFailed("Authentication failed: Client requested an authorization id that is different from username")
		}
	}
	done := e.conversation.Done() && e.conversation.Valid()
	return []byte(answer), done, nil
}

func (e *scramExchange) Principal() Principal { return User(e.conversation.Username()) }
