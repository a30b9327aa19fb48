// Package rediscluster starts real Redis servers for tests: one plain
// redis-server, or a Redis Cluster of masters and replicas, each on free
// loopback ports in a directory of its own, and tears them down.
//
// The binaries are Debian's (packages redis-server and redis-tools), which
// `make redis` installs when missing. Without them Start fails with an
// error that names `make redis`; a test that needs Redis fails, it never
// skips.
//
// Every process is started with the parent-death signal set to SIGKILL,
// and Close kills it and waits for it, so no redis-server outlives the
// test binary, even one that panics. A Node can be killed, stopped and
// continued, and restarted on its port with its cluster state, for fault
// tests.
package rediscluster
