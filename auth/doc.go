// Package auth is who a client is: the principal a listener gives a
// connection (Kafka's KafkaPrincipal, "User:alice"), from a TLS client
// certificate or a SASL exchange. The ACL authorizer (package acl) decides
// what a principal may do.
package auth
