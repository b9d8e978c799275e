// Package faultproxy is a TCP proxy for tests that stands between a Kafka
// client (a mirror node) and its source and breaks the connection in
// seeded ways: it cuts connections between frames, cuts them in the middle
// of a frame (a partial frame: part of a response forwarded, then the
// cut), delays frames, and stalls one direction (forwards nothing for a
// while and keeps the socket open). It rewrites nothing: a source node
// whose advertised listener is the proxy's address sends the client's
// metadata-driven reconnects through the proxy too.
//
// Framing: it reads Kafka's size-delimited frames (a 4-byte big-endian
// length, then the frame). Requests give the API key, version and
// correlation ID of each exchange; a response is matched to its request
// by correlation ID and, once forwarded whole, handed to Config.Observe:
// the test's own count of what the source answered and when. A response
// cut short is never observed: the client did not get it.
//
// Faults: the proxy numbers the frames it forwards (both directions, all
// connections, in the order it handles them); after a seeded number of
// frames drawn from [Plan.EveryMin, Plan.EveryMax] the next frame gets a
// fault of a seeded kind. The sequence of faults is the seed's; which
// frame each one lands on depends on the interleaving of the connections,
// which the scheduler decides, so a seed reproduces the plan, not the run.
//
// Bounds: a frame is at most FrameBytesMax (a larger one cuts the
// connection), a connection at most InFlightMax requests awaiting their
// responses, the proxy at most ConnsMax live connections. Close cuts
// everything and waits for every goroutine.
package faultproxy
