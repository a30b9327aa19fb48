// Package l2 is kvallocd's second tier: a remote key-value store, shared
// by the daemons of many nodes, behind the node's L1 (package l1).
//
// The contract:
//
//   - Store is the small interface the daemon uses: batched Head (which
//     values exist, and their sizes, without their bytes), Get, Load (Get
//     into the caller's memory: the daemon's blocks), Put and Delete of
//     KV objects named by l1.ObjectKey, plus Stats and Close.
//     Tier implements it over a Backend, the raw store (Redis, through
//     NewRedis; a later store is one more Backend).
//   - Every value carries a header (Codec.Encode): magic, version, the
//     full key, the MAC key id, the payload's size and CRC32C, a CRC32C of
//     the header and key, and two HMAC-SHA-256 MACs under a secret the
//     nodes share (NewSecret, NewCodec): one of the header, key and
//     payload, one of the header and key. Tier serves a payload only when
//     all of them check (Codec.Decode, or Codec.DecodeInto for Load, which
//     checks the payload's CRC32C and MAC as it copies it and reports a
//     miss for any refusal, so that the caller never serves the bytes it
//     copied). A value that is damaged (ErrCorrupt) or fails its MAC
//     (ErrForged) is a miss, is counted, and is deleted from the store;
//     one of another format version or a secret the codec does not hold
//     (ErrForeign) is a miss, counted, and left in the store. None is
//     ever returned. Without a secret (Unauthenticated, the default of
//     Options.Codec) values carry no MAC, and anyone who can write to the
//     store can forge them.
//   - With Options.PieceSize (kvallocd -l2-piece-size, 256 KiB by
//     default there) an object is stored as pieces (format version 5,
//     pieces.go), each its own value with its own header and MACs (the
//     piece's payload under an AES-256-GMAC, its header under an
//     HMAC-SHA-256), named
//     (PieceName) so that consecutive pieces land on different masters,
//     read over connections of the tier's own (RESPReader) straight into
//     the caller's memory and written from it (PayloadStore.PutPayloads)
//     without a copy. An object is a hit only when every piece is there
//     and checks: a piece missing, refused or of another object, layout,
//     put or secret is a miss of the whole object, counted, never part
//     of one. Head counts an object in pieces only while every master
//     that holds one of its pieces takes calls (its breaker does not
//     refuse them), as Load would skip that piece. Piece 0 is the
//     object's commit, the piece Head reads: a put writes it only once
//     every other piece is stored (a put cut short leaves none of its
//     own), and a Load that finds a piece gone from the store (evicted,
//     deleted) deletes the object, so that no lookup counts it again. A
//     tier in pieces reads no whole values, nor one on whole values
//     pieces.
//   - NewRedis takes redis[s][+cluster|+plain]://[user@]host:port[,...]
//     (ParseURL), a password and TLS in RedisOptions; it fails with ErrAuth
//     when Redis refuses the credentials at start.
//   - Tier never fails a caller because the store failed: every call has
//     a timeout, a failure is a miss (Get, Head) or a dropped put, and
//     after Options.BreakerFailures failures in a row, or one call that
//     ran out its timeout, the circuit breaker opens: for
//     Options.BreakerCooldown every call is skipped at once; then one
//     call probes, and its success closes the breaker. On a Sharded
//     backend (a Redis Cluster) this holds per server: a batch is one
//     call per master, all at once, each with its own timeout and
//     breaker, so a hung or dead master costs its own keys only. A call
//     cut short by the caller's own deadline (a lookup's budget) counts
//     neither way.
//   - The store evicts on its own (for Redis, maxmemory with allkeys-lru);
//     Tier never manages its capacity.
//
// Tier's methods are safe for concurrent use.
package l2
