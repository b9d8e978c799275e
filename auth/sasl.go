package auth

// SASL on a listener, as Kafka's SaslServerAuthenticator runs it: the
// client names a mechanism (SaslHandshake), then client and server trade
// tokens (SaslAuthenticate) until the mechanism's exchange completes or
// fails. Each mechanism here is a server: a state machine over tokens that
// does no I/O (netio carries the tokens). An exchange takes a bounded
// number of tokens (PLAIN one, SCRAM two, OAUTHBEARER one, or two after an
// error answer); a Step after it completed or failed is an error.

import (
	"errors"
	"fmt"
)

// Mechanism names, as sasl.enabled.mechanisms spells them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// SASLMechanism is one enabled mechanism of a listener.
type SASLMechanism interface {
	Name() string
	// NewExchange starts one client's authentication.
	NewExchange() SASLExchange
}

// SASLExchange is one client's authentication with one mechanism.
type SASLExchange interface {
	// Step takes the client's next token and returns the server's
	// answer; done reports that the client is authenticated (the answer
	// is still sent). An error is a failed authentication: a *SASLError
	// says what the client is told.
	Step(token []byte) (challenge []byte, done bool, err error)
	// Principal is who the client is, once Step reported done.
	Principal() Principal
}

// ErrSASLAuthentication is a failed SASL authentication (Kafka's
// SASL_AUTHENTICATION_FAILED); errors.As finds the *SASLError with the
// client's message.
var ErrSASLAuthentication = errors.New("auth: SASL authentication failed")

// errExchangeOver is a Step after the exchange completed or failed.
var errExchangeOver = errors.New("the exchange is over")

// SASLError is a failed exchange. Message is what the client is told:
// Kafka's SaslAuthenticationException text, or for a failure whose cause
// must not reach an unauthenticated client (an unknown user, a malformed
// token) Kafka's generic "due to invalid credentials" sentence.
type SASLError struct {
	Message string
	Err     error // the cause, for the server's log
}

func (e *SASLError) Error() string { return fmt.Sprintf("%s: %v", e.Message, e.Err) }
func (e *SASLError) Unwrap() error { return e.Err }

// authenticationFailed is Kafka's SaslAuthenticationException: message
// goes to the client as it is.
func authenticationFailed(message string) error {
	return &SASLError{Message: message, Err: ErrSASLAuthentication}
}

// invalidCredentials is a SaslException: the client is told only the
// mechanism, as Kafka does ("DO NOT include error message from the
// SaslException in the client response").
func invalidCredentials(mechanism string, cause error) error {
	return &SASLError{
		Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism,
		Err:     fmt.Errorf("%w: %w", ErrSASLAuthentication, cause),
	}
}

// SASLConfig is a SASL listener's enabled mechanisms
// (sasl.enabled.mechanisms), in the order configured.
type SASLConfig struct {
	Mechanisms []SASLMechanism
}

// Names lists the enabled mechanisms, as SaslHandshake answers them.
func (c *SASLConfig) Names() []string {
	names := make([]string, len(c.Mechanisms))
	for i, m := range c.Mechanisms {
		names[i] = m.Name()
	}
	return names
}

// Mechanism returns the enabled mechanism called name (case matters, as
// in Kafka).
func (c *SASLConfig) Mechanism(name string) (SASLMechanism, bool) {
	for _, m := range c.Mechanisms {
		if m.Name() == name {
			return m, true
		}
	}
	return nil, false
}
