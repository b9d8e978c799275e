package netio

import (
	"github.com/mirrord/mirrord/auth"
)

// Listener is one of the node's listeners, as Kafka's listeners,
// advertised.listeners and listener.security.protocol.map name them. A
// node serves several at once, one per port.
type Listener struct {
	// Name is the listener name: "PLAINTEXT", "SSL", "CLIENT", ...
	Name     string
	Protocol auth.SecurityProtocol
	// AdvertisedHost and AdvertisedPort are the address this listener's
	// clients are told to connect to; empty: Backend.Cluster()'s.
	AdvertisedHost string
	AdvertisedPort int32
	// SASL is the enabled mechanisms of a SASL_PLAINTEXT or SASL_SSL
	// listener (required there, unused elsewhere).
	SASL *auth.SASLConfig
}

// plaintextListener is what Serve serves: Kafka's default listener.
var plaintextListener = Listener{Name: "PLAINTEXT", Protocol: auth.Plaintext}
