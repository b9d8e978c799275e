// Package mirrorwire holds the wire types of mirrord's own API keys: the
// requests and responses of the mirror admin RPCs of KIP-1279 (keys.go,
// messages.go), as kmsg.Request and kmsg.Response so that a franz-go
// client sends them with client.Request, and their encoding (codec.go),
// written on franz-go's kbin reader and writers.
//
// It is a leaf: it imports only the standard library, kbin and kmsg, so
// that the server (netio), the CLI (cmd/mirrord) and failback's client
// (engine) share the messages without importing one another.
//
// Invariants: the encoding is canonical (known tags in ascending order, a
// tagged field holding its default omitted, shortest varints), so a
// decoded message re-encodes to at most the bytes it came from; a count
// read from the wire is bounded by the bytes left, so hostile input cannot
// make the decoder allocate more than a few times its size.
package mirrorwire
