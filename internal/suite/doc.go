// Package suite holds l1's contract tests that make sense over a socket,
// run against two front ends, as bbolt runs one suite against each of its
// freelists: the manager in process, and the manager behind kvallocd,
// reached through a client connection (daemoncheck.Front). The ReserveWrite
// properties run through both front ends in package proptest
// (TestPropThroughDaemon). It has no API; its tests are the point.
package suite
