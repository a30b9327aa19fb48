// Package suite holds l1's contract tests that make sense over a socket,
// run against three front ends, as bbolt runs one suite against each of
// its freelists: the manager in process; the manager behind kvallocd,
// reached through a client connection (daemoncheck.Front); and the same
// with the daemon's L2 tier on, over a real redis-server, with pools of a
// few dozen blocks, so that a read of a key L1 lost is served from L2
// (daemoncheck.FrontL2). Where a contract differs with L2 (a key L1 lost
// but L2 holds is a hit, not a miss), the test says so. The ReserveWrite
// properties run through all three in package proptest
// (TestPropThroughDaemon, TestPropThroughDaemonL2). It has no API; its
// tests are the point.
package suite
