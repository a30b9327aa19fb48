// Package wire is the frame codec of kvallocd, the node daemon that shares
// one KV-cache pool between processes: the one definition of every message
// that the server (package server) and every client (package client, and
// clients in other languages) share. PROTOCOL.md, beside this file, gives
// every message's layout byte by byte, every error code, every status and
// every limit; this package is its executable form, and the conformance
// vectors under testdata/wire/ (the bytes of every request and answer,
// with their decoded form in JSON) tie the two together for clients in
// other languages.
//
// # Contract
//
//   - A frame is a 24-byte header and a body, all little-endian, with no
//     padding, no alignment and no serialization library. The header's
//     first field is the size of the whole frame, so a reader knows how
//     much to read before it parses anything.
//   - Every length is checked against the bytes that hold it and against
//     the limits (MaxFrame, MaxKeys, MaxStringLen, MaxStrings) before it is
//     used; a frame that breaks any rule decodes to an *Error with
//     CodeBadFrame (or CodeTooLarge, CodeUnknownType) and never panics,
//     whatever its bytes (FuzzFrameDecoder in package fuzz holds it to
//     that).
//   - Reserved fields and unused parameters must be zero: a frame that sets
//     them is malformed, so that a later version can give them meaning.
//   - Encoding is append-style (AppendRequest, AppendAnswer) into a
//     caller's buffer, and decoding fills a caller's Request or Answer,
//     reusing its slices, so a connection that reuses both allocates
//     nothing per frame but the keys' strings.
//
// Protocol version 2 (Version2) is version 1 plus key handles: a hello of
// version 2 makes the connection's grants answer a handle per lock
// (Result.Handle), and the finishing calls and delete may name their keys
// by handle (FlagHandles, Request.Handles). A Decoder decodes by the rules
// of its Version, so a version 1 connection refuses what version 2 adds.
//
// KV bytes never travel in a frame: the daemon passes the pool's memfd
// once, in the hello answer, and every later answer names memory by offset.
package wire
