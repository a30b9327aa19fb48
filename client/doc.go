// Package client is the Go client of kvallocd, the node daemon that
// shares one KV-cache pool between processes (package server,
// cmd/kvallocd). A Client is one connection: Dial says hello, receives
// the pool's memfd and maps it MAP_SHARED, so KV bytes are written and
// read in place (Bytes) and never cross the socket; the batch calls
// (ReserveWrite, FinishWrite, ReserveReadPrefix, FinishRead, ...) are the
// l1 manager's, one request frame each, with l1's statuses in request
// order.
//
// # Contract
//
//   - Dial talks only to a daemon it trusts: before it sends anything it
//     reads the credentials of the process serving the socket
//     (SO_PEERCRED), whose uid must be root or this process's
//     (Options.DaemonUIDs to say otherwise); any other is refused with an
//     error wrapping ErrUntrustedDaemon that names both uids.
//   - Dial speaks protocol version 2 (key handles: the finishing calls
//     name their keys by the handles the grants answered) when the daemon
//     does, and falls back to version 1, connecting again, when the daemon
//     refuses a version 2 hello; Options.Version picks one. Every call's
//     answer is the same in both versions: on version 2 the Client keeps
//     its connection's ledger as the answers tell it, and a key it holds
//     no lock on under the lease presented is NOT_OWNER, as in version 1.
//   - Every error of the connection names the socket's path.
//   - A Client is safe for concurrent use; its calls are serialized.
//   - Every call has a deadline (Options.Timeout). A daemon that died, or
//     stopped answering, makes the call fail with an error wrapping
//     ErrDisconnected within it, never hang; the Client is then broken, and
//     Dial connects to the next daemon.
//   - Arguments a frame cannot carry, or that exceed the limits of the
//     daemon's hello (its MaxKeys, its MaxFrame), are refused before
//     anything is sent, and the Client goes on. Once a request's first
//     byte is sent, any failure breaks the Client (ErrDisconnected): a
//     transport error, a malformed answer, or one that is not one result
//     or status per key.
//   - The locks a call takes belong to the connection. Closing the Client,
//     or the death of its process at any instant, releases them all in the
//     daemon at once. Its leases are refused on any other connection.
//   - Leases and blocks carry the daemon's epoch; one from an earlier
//     daemon is refused with an error wrapping wire.ErrWrongEpoch.
//   - A refusal by the daemon is a *wire.Error; errors.Is matches it
//     against the wire sentinels, and an invalid argument or a closed
//     daemon also against l1.ErrInvalidArgument and l1.ErrClosed, as in
//     process.
package client
