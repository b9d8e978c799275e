package mirrord

// The node's listeners, by Kafka's broker configs: listeners (NAME://HOST:PORT,
// several, one per port), advertised.listeners, listener.security.protocol.map
// (listener names other than the protocols', CLIENT:SASL_SSL), and the TLS
// settings of SSL and SASL_SSL listeners: ssl.keystore.location (PEM: the
// certificate chain and key), ssl.keystore.type (PEM only), ssl.key.password,
// ssl.truststore.location (PEM CA certificates), ssl.truststore.type,
// ssl.client.auth (required, requested, none) and ssl.principal.mapping.rules,
// each overridable per listener as listener.name.<name>.ssl.* (the name in
// lower case, as Kafka writes it). As in Kafka, a SASL_SSL listener takes
// ssl.client.auth only from its listener.name prefix (KIP-684).
//
// A listener with port 0 binds a free port (ListenAndServe); one served
// on a socket the caller owns (ServeListener) takes its TLS and SASL from
// here, by name.
//
// Other ssl.* configs (ssl.cipher.suites, ssl.enabled.protocols, ...) stay in
// the properties and are refused there by name. mirrord requires a
// truststore when ssl.client.auth is required or requested (Kafka would fall
// back on the JVM's default CAs).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/netio"
)

// listenerConfig is one listener of the properties.
type listenerConfig struct {
	netio.Listener
	address    string // HOST:PORT to bind
	advertised string // HOST:PORT from advertised.listeners; "": the bound address
}

// sslKeys are the ssl.* configs a listener takes.
var sslKeys = []string{"ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
	"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.client.auth", "ssl.principal.mapping.rules"}

// ErrListenerConfig is a listener config mirrord cannot serve.
var ErrListenerConfig = errors.New("mirrord: listeners")

// takeListeners takes the listener configs out of props and returns the
// listeners (none when props has no listeners key).
func takeListeners(props map[string]string) ([]listenerConfig, error) {
	endpoints, err := parseEndpoints("listeners", props["listeners"])
	if err != nil {
		return nil, err
	}
	advertised, err := parseEndpoints("advertised.listeners", props["advertised.listeners"])
	if err != nil {
		return nil, err
	}
	protocols, err := parseProtocolMap(props)
	if err != nil {
		return nil, err
	}
	listeners := make([]listenerConfig, 0, len(endpoints))
	ports := map[string]string{}
	for _, e := range endpoints {
		protocol, ok := protocols[e.name]
		if !ok {
			return nil, fmt.Errorf("%w: no security protocol defined for listener %s (listener.security.protocol.map)", ErrListenerConfig, e.name)
		}
		if _, port, _ := net.SplitHostPort(e.address); port != "0" && ports[port] != "" {
			return nil, fmt.Errorf("%w: listeners %s and %s have the same port %s", ErrListenerConfig, ports[port], e.name, port)
		} else {
			ports[port] = e.name
		}
		l := listenerConfig{Listener: netio.Listener{Name: e.name, Protocol: protocol}, address: e.address}
		if protocol.UsesTLS() {
			if l.TLS, l.PrincipalMapper, err = listenerTLS(props, e.name, protocol); err != nil {
				return nil, err
			}
		}
		listeners = append(listeners, l)
	}
	for _, a := range advertised {
		i := indexEndpoint(endpoints, a.name)
		if i < 0 {
			return nil, fmt.Errorf("%w: advertised.listeners names %s, which listeners does not", ErrListenerConfig, a.name)
		}
		listeners[i].advertised = a.address
	}
	takeListenerKeys(props, endpoints)
	return listeners, nil
}

// SetListener sets, in props (server.properties keys), the address of the
// listener called name (PLAINTEXT, SSL, SASL_PLAINTEXT, or a name
// listener.security.protocol.map gives a protocol), adding it to
// listeners when it is not there; advertised, when not empty, is its
// address in advertised.listeners. It is what `mirrord serve --listen`,
// --ssl-listen, --sasl-listen and --advertise do to the config file's.
func SetListener(props map[string]string, name, address, advertised string) error {
	name = strings.ToUpper(name)
	for key, value := range map[string]string{"listeners": address, "advertised.listeners": advertised} {
		if value == "" {
			continue
		}
		endpoints, err := parseEndpoints(key, props[key])
		if err != nil {
			return err
		}
		if _, err := parseEndpoints(key, name+"://"+value); err != nil {
			return err
		}
		endpoints = setEndpoint(endpoints, name, value)
		items := make([]string, len(endpoints))
		for i, e := range endpoints {
			items[i] = e.name + "://" + e.address
		}
		props[key] = strings.Join(items, ",")
	}
	return nil
}

// takeListenerKeys deletes the listener configs this file takes.
func takeListenerKeys(props map[string]string, endpoints []endpoint) {
	for _, key := range []string{"listeners", "advertised.listeners", "listener.security.protocol.map"} {
		delete(props, key)
	}
	for _, key := range sslKeys {
		delete(props, key)
		for _, e := range endpoints {
			delete(props, listenerPrefix(e.name)+key)
		}
	}
}

type endpoint struct{ name, address string }

// parseEndpoints parses Kafka's NAME://HOST:PORT,... (names in any case,
// as Kafka upper-cases them; an empty host binds every interface).
func parseEndpoints(key, value string) ([]endpoint, error) {
	var endpoints []endpoint
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, address, ok := strings.Cut(item, "://")
		host, port, err := net.SplitHostPort(address)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%w: %s: %q is not NAME://HOST:PORT", ErrListenerConfig, key, item)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("%w: %s: %q: bad port", ErrListenerConfig, key, item)
		}
		name = strings.ToUpper(name)
		if indexEndpoint(endpoints, name) >= 0 {
			return nil, fmt.Errorf("%w: %s: listener %s appears twice", ErrListenerConfig, key, name)
		}
		endpoints = append(endpoints, endpoint{name: name, address: net.JoinHostPort(host, port)})
	}
	return endpoints, nil
}

func indexEndpoint(endpoints []endpoint, name string) int {
	for i, e := range endpoints {
		if e.name == name {
			return i
		}
	}
	return -1
}

// setEndpoint sets the address of the listener called name, adding it.
func setEndpoint(endpoints []endpoint, name, address string) []endpoint {
	if i := indexEndpoint(endpoints, name); i >= 0 {
		endpoints[i].address = address
		return endpoints
	}
	return append(endpoints, endpoint{name: name, address: address})
}

// parseProtocolMap parses listener.security.protocol.map (NAME:PROTOCOL,...);
// unset, each protocol's own name maps to it, as Kafka's default does.
func parseProtocolMap(props map[string]string) (map[string]auth.SecurityProtocol, error) {
	protocols := map[string]auth.SecurityProtocol{}
	value, ok := props["listener.security.protocol.map"]
	if !ok {
		for _, p := range []auth.SecurityProtocol{auth.Plaintext, auth.SSL, auth.SASLPlaintext, auth.SASLSSL} {
			protocols[p.String()] = p
		}
		return protocols, nil
	}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, protocolName, ok := strings.Cut(item, ":")
		protocol, err := auth.ParseSecurityProtocol(strings.TrimSpace(protocolName))
		if !ok || err != nil {
			return nil, fmt.Errorf("%w: listener.security.protocol.map: %q is not NAME:PROTOCOL (%v)", ErrListenerConfig, item, err)
		}
		protocols[strings.ToUpper(strings.TrimSpace(name))] = protocol
	}
	return protocols, nil
}

// listenerPrefix is Kafka's ListenerName.configPrefix.
func listenerPrefix(name string) string { return "listener.name." + strings.ToLower(name) + "." }

// listenerTLS builds an SSL or SASL_SSL listener's TLS config from its
// ssl.* configs (listener.name.<name>.ssl.* first).
func listenerTLS(props map[string]string, name string, protocol auth.SecurityProtocol) (*tls.Config, *auth.PrincipalMapper, error) {
	get := func(key string) (string, bool) {
		if value, ok := props[listenerPrefix(name)+key]; ok {
			return value, true
		}
		if key == "ssl.client.auth" && protocol == auth.SASLSSL {
			return "", false // KIP-684: only the listener's own setting
		}
		value, ok := props[key]
		return value, ok
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: listener %s: %s", ErrListenerConfig, name, fmt.Sprintf(format, args...))
	}
	for _, key := range []string{"ssl.keystore.type", "ssl.truststore.type"} {
		if kind, ok := get(key); ok && !strings.EqualFold(kind, "PEM") {
			return nil, nil, fail("%s %s: mirrord reads PEM stores only (convert with keytool and openssl)", key, kind)
		}
	}
	if _, ok := get("ssl.keystore.password"); ok {
		return nil, nil, fail("ssl.keystore.password cannot be specified with PEM format, only ssl.key.password may be specified")
	}
	if _, ok := get("ssl.truststore.password"); ok {
		return nil, nil, fail("ssl.truststore.password cannot be specified for PEM format")
	}
	keystore, _ := get("ssl.keystore.location")
	if keystore == "" {
		return nil, nil, fail("%s needs ssl.keystore.location", protocol)
	}
	password, _ := get("ssl.key.password")
	certificate, err := auth.ReadKeystore(keystore, password)
	if err != nil {
		return nil, nil, fail("ssl.keystore.location %s: %v", keystore, err)
	}
	config := &tls.Config{Certificates: []tls.Certificate{certificate}, MinVersion: tls.VersionTLS12}
	clientAuth, _ := get("ssl.client.auth")
	switch strings.ToLower(clientAuth) {
	case "", "none":
		config.ClientAuth = tls.NoClientCert
	case "requested":
		config.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		config.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, nil, fail("ssl.client.auth %q: want required, requested or none", clientAuth)
	}
	truststore, _ := get("ssl.truststore.location")
	switch {
	case truststore != "":
		if config.ClientCAs, err = auth.ReadTruststore(truststore); err != nil {
			return nil, nil, fail("ssl.truststore.location %s: %v", truststore, err)
		}
	case config.ClientAuth != tls.NoClientCert:
		return nil, nil, fail("ssl.client.auth=%s needs ssl.truststore.location", clientAuth)
	}
	rules, ok := get("ssl.principal.mapping.rules")
	if !ok || rules == "" {
		rules = auth.DefaultPrincipalMappingRules
	}
	mapper, err := auth.ParsePrincipalMappingRules(rules)
	if err != nil {
		return nil, nil, fail("%v", err)
	}
	return config, mapper, nil
}
