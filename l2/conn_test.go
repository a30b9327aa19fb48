package l2_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l2"
)

// TestParseURL: what the -l2 URL may say, and everything else refused
// with an error that says why; a password in the URL is refused, named
// never, and pointed at -l2-password-file. Before, the parser took
// "redis://h:1/0" and "redis://h:1?password=x" (the port "1/0", the
// password dropped) and refused users and rediss://.
func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in    string
		addrs string
		tls   bool
		mode  l2.Mode
		user  string
	}{
		{"redis://127.0.0.1:6379", "127.0.0.1:6379", false, l2.ModeAuto, ""},
		{"redis://h:1/", "h:1", false, l2.ModeAuto, ""},
		{"redis://a:1,b:2,c:3", "a:1 b:2 c:3", false, l2.ModeAuto, ""},
		{"redis+cluster://h:1", "h:1", false, l2.ModeCluster, ""},
		{"redis+plain://h:1", "h:1", false, l2.ModePlain, ""},
		{"rediss://kvalloc@h:1,h:2", "h:1 h:2", true, l2.ModeAuto, "kvalloc"},
		{"rediss+cluster://u@[::1]:6379", "[::1]:6379", true, l2.ModeCluster, "u"},
	} {
		u, err := l2.ParseURL(c.in)
		if err != nil || strings.Join(u.Addrs, " ") != c.addrs || u.TLS != c.tls || u.Mode != c.mode || u.Username != c.user {
			t.Errorf("%s: %+v, %v", c.in, u, err)
		}
	}
	for _, c := range []struct{ in, says string }{
		{"redis://:s3cr3tpw@h:1", "-l2-password-file"},
		{"redis://user:s3cr3tpw@h:1", "-l2-password-file"},
		{"redis://h:1/0", "database"},
		{"redis://h:1?password=s3cr3tpw", "query"},
		{"redis://h:1?", "query"},
		{"redis://h:1#x", "fragment"},
		{"http://h:1", "scheme"},
		{"redis+sentinel://h:1", "scheme"},
		{"redis+plain://a:1,b:2", "+plain"},
		{"redis://h", "host:port"},
		{"redis://", "no address"},
		{"redis://h:1,", "host:port"},
		{"127.0.0.1:6379", "want redis"},
	} {
		_, err := l2.ParseURL(c.in)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "s3cr3tpw") {
			t.Errorf("%s: %v; want a refusal saying %q, without the password", c.in, err, c.says)
		}
	}
}

// logBuf is a slog handler's writer that tests read.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// TestRedisAuth: against a real redis-server with a password and an ACL
// user limited to the tier's prefix. Without the password NewRedis fails
// with ErrAuth (before: it started, every call failed NOAUTH, and nothing
// was logged); with it, and as the ACL user with the user's password, a
// tier stores and serves; a tier whose names are outside the user's
// prefix is refused (NOPERM), and a password changed under a running tier
// makes its calls misses that are counted (Stats.AuthFailures,
// kvallocd_l2_auth_failures_total) and logged.
func TestRedisAuth(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	admin := srv.Client()
	defer admin.Close()
	ctx := t.Context()
	// The ACL user docs/OPERATING.md recommends: the tier's prefix and
	// the commands it sends, nothing else.
	acl := strings.Fields("ACL SETUSER kvalloc on >user-pw ~kvl2:* -@all +get +set +getrange +strlen +exists +del +info +ping +cluster|slots +cluster|nodes +cluster|info +hello +auth +readonly")
	if err := admin.Do(ctx, anys(acl)...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "requirepass", "default-pw").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.NewRedis(ctx, srv.URL(), l2.RedisOptions{}); !errors.Is(err, l2.ErrAuth) || !strings.Contains(err.Error(), "-l2-password-file") {
		t.Fatalf("no password against requirepass: %v, want ErrAuth naming -l2-password-file", err)
	}
	if _, err := l2.NewRedis(ctx, srv.URL(), l2.RedisOptions{Password: "wrong"}); !errors.Is(err, l2.ErrAuth) {
		t.Fatalf("a wrong password: %v, want ErrAuth", err)
	}
	user := strings.Replace(srv.URL(), "redis://", "redis://kvalloc@", 1)
	for _, c := range []struct{ url, pw string }{{srv.URL(), "default-pw"}, {user, "user-pw"}} {
		r, err := l2.NewRedis(ctx, c.url, l2.RedisOptions{Password: c.pw})
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		tier, _ := l2.NewTier(r, l2.Options{})
		roundTrip(t, tier, keysN("auth", 8), 4096)
		tier.Close()
		// The piece path's own connections authenticate alike.
		r, err = l2.NewRedis(ctx, c.url, l2.RedisOptions{Password: c.pw})
		if err != nil {
			t.Fatal(err)
		}
		tier, err = l2.NewTier(r, l2.Options{PieceSize: 1024})
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, tier, keysN("auth-pieces", 8), 4096)
		tier.Close()
	}
	var log logBuf
	r, err := l2.NewRedis(ctx, user, l2.RedisOptions{Password: "user-pw", Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	outside, _ := l2.NewTier(r, l2.Options{Prefix: "elsewhere:"})
	defer outside.Close()
	keys := keysN("outside", 4)
	_, vs := payloads(keys, 100)
	if n := outside.Put(ctx, keys, vs); n != 0 {
		t.Fatalf("a put outside the ACL user's keys stored %d", n)
	}
	if s := outside.Stats(); s.AuthFailures == 0 || !strings.Contains(log.String(), "NOPERM") {
		t.Fatalf("NOPERM not counted or logged: %+v; log %q", s, log.String())
	}

	var log2 logBuf
	r2, err := l2.NewRedis(ctx, srv.URL(), l2.RedisOptions{Password: "default-pw", Logger: log2.logger()})
	if err != nil {
		t.Fatal(err)
	}
	tier, _ := l2.NewTier(r2, l2.Options{Timeout: time.Second})
	defer tier.Close()
	roundTrip(t, tier, keysN("before", 4), 100)
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "resetpass", ">changed").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "USER", "default").Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		tier.Get(ctx, keysN("before", 4))
	}
	if s := tier.Stats(); s.AuthFailures == 0 || !strings.Contains(log2.String(), "refuses the daemon's credentials") {
		t.Fatalf("a changed password: %+v; log %q", s, log2.String())
	}
	t.Logf("after the password changed: %d calls refused for the credentials; log: %s", tier.Stats().AuthFailures, strings.TrimSpace(log2.String()))
}

// tlsFiles makes a CA, a server certificate for 127.0.0.1 and a client
// certificate signed by it, as PEM files (keys of mode 0600) in dir.
func tlsFiles(t *testing.T, dir string) (ca, cert, key, ccert, ckey string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kvalloc test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, []byte) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(k)
		return der, kd
	}
	sd, sk := leaf(2, "redis", x509.ExtKeyUsageServerAuth)
	cd, ck := leaf(3, "kvallocd", x509.ExtKeyUsageClientAuth)
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", sd), write("server.key", "EC PRIVATE KEY", sk),
		write("client.pem", "CERTIFICATE", cd), write("client.key", "EC PRIVATE KEY", ck)
}

// freePort is a loopback port free when asked.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRedisTLS: a real redis-server serving TLS (Debian's build has it)
// on a port of its own, its certificate and the client's signed by a CA
// the test makes; a rediss:// tier with the CA and the client
// certificate (tls-auth-clients yes, Redis's default) stores and serves;
// one with another CA, or without a client certificate, serves nothing,
// and a redis:// client on the TLS port neither. Before, rediss:// was
// refused at start.
func TestRedisTLS(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	dir := t.TempDir()
	ca, cert, key, ccert, ckey := tlsFiles(t, dir)
	admin := srv.Client()
	defer admin.Close()
	ctx := t.Context()
	var port int
	var err error
	for range 5 {
		port = freePort(t)
		if err = admin.Do(ctx, "CONFIG", "SET", "tls-cert-file", cert, "tls-key-file", key, "tls-ca-cert-file", ca,
			"tls-port", strconv.Itoa(port)).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redis-server takes no TLS port (built without TLS?): %v", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	conf, err := l2.TLSConfig(ca, ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l2.NewRedis(ctx, "rediss://"+addr, l2.RedisOptions{TLS: conf})
	if err != nil {
		t.Fatal(err)
	}
	tier, _ := l2.NewTier(r, l2.Options{})
	roundTrip(t, tier, keysN("tls", 8), 64<<10)
	tier.Close()
	// The piece path's own connections speak TLS alike.
	r, err = l2.NewRedis(ctx, "rediss://"+addr, l2.RedisOptions{TLS: conf})
	if err != nil {
		t.Fatal(err)
	}
	tier, err = l2.NewTier(r, l2.Options{PieceSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, tier, keysN("tls-pieces", 8), 64<<10)
	tier.Close()

	_, _, _, otherCCert, otherCKey := tlsFiles(t, t.TempDir())
	otherCA, _, _, _, _ := tlsFiles(t, t.TempDir())
	wrongCA, _ := l2.TLSConfig(otherCA, ccert, ckey)
	strangerCert, _ := l2.TLSConfig(ca, otherCCert, otherCKey)
	noCert, _ := l2.TLSConfig(ca, "", "")
	for name, c := range map[string]struct {
		url  string
		conf *tls.Config
	}{"another CA": {"rediss://" + addr, wrongCA}, "a client certificate of another CA": {"rediss://" + addr, strangerCert},
		"no client certificate": {"rediss://" + addr, noCert}, "no TLS": {"redis+plain://" + addr, nil}} {
		r, err := l2.NewRedis(ctx, c.url, l2.RedisOptions{TLS: c.conf, Timeout: time.Second})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tier, _ := l2.NewTier(r, l2.Options{Timeout: time.Second, PieceSize: int64(len(name) % 2 * 1024)}) // some in pieces
		keys := keysN("tls", 8)
		_, vs := payloads(keys, 100)
		if n := tier.Put(ctx, keys, vs); n != 0 {
			t.Errorf("%s: stored %d", name, n)
		}
		for i, p := range tier.Get(ctx, keys) {
			if p != nil {
				t.Errorf("%s: served key %d", name, i)
			}
		}
		tier.Close()
	}
	if _, err := l2.NewRedis(ctx, "redis://"+addr, l2.RedisOptions{TLS: conf}); err == nil {
		t.Fatal("TLS options with a redis:// URL were taken")
	}
}

// silentSeed starts a client with one seed stopped (SIGSTOP) for a
// moment at start, then continued, and counts what 30 puts and gets of
// it achieve.
func silentSeed(t *testing.T, seed *rediscluster.Node, url string) (log string, puts, hits int) {
	t.Helper()
	ctx := context.Background()
	var lb logBuf
	if err := seed.Stop(); err != nil {
		t.Fatal(err)
	}
	r, err := l2.NewRedis(ctx, url, l2.RedisOptions{Timeout: 300 * time.Millisecond, Logger: lb.logger()})
	if cerr := seed.Cont(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	tier, _ := l2.NewTier(r, l2.Options{Timeout: 5 * time.Second, BreakerFailures: 1000})
	defer tier.Close()
	keys := keysN("silent", 30)
	ps, vs := payloads(keys, 1000)
	for i := range keys {
		puts += tier.Put(ctx, keys[i:i+1], vs[i:i+1])
	}
	for i, p := range tier.Get(ctx, keys) {
		if bytes.Equal(p, ps[i]) {
			hits++
		}
	}
	return lb.String(), puts, hits
}

// TestRedisSeedSilentAtStart: a one-seed URL whose seed does not answer
// at start is not taken for a plain Redis for life. Before, a cluster
// seed stopped for the start left the daemon on a plain client: 11 of 30
// hits, 18 of 24 puts failed (MOVED), nothing logged. Now the client asks
// again at each call until the seed answers, and logs both: against a
// cluster and against a plain Redis, every put and get succeeds once it
// is back.
func TestRedisSeedSilentAtStart(t *testing.T) {
	// A node timeout far past the stop: the cluster must not mark the
	// stopped master failed (it has no replica) however loaded the
	// machine.
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1, NodeTimeout: 30 * time.Second})
	log, puts, hits := silentSeed(t, c.Nodes[0], "redis://"+c.Nodes[0].Addr())
	t.Logf("cluster seed stopped at start: %d of 30 puts, %d of 30 hits", puts, hits)
	if puts != 30 || hits != 30 || !strings.Contains(log, "did not say") || !strings.Contains(log, "redis=cluster") {
		t.Fatalf("cluster: %d puts, %d hits of 30; log:\n%s", puts, hits, log)
	}
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	log, puts, hits = silentSeed(t, srv.Node, srv.URL())
	if puts != 30 || hits != 30 || !strings.Contains(log, "redis=plain") {
		t.Fatalf("plain: %d puts, %d hits of 30; log:\n%s", puts, hits, log)
	}
	// A seed that answers at start: the choice is logged.
	var lb logBuf
	r, err := l2.NewRedis(t.Context(), "redis://"+c.Nodes[1].Addr(), l2.RedisOptions{Logger: lb.logger()})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !strings.Contains(lb.String(), "client=cluster") {
		t.Fatalf("the choice is not logged: %q", lb.String())
	}
}

// TestRedisEmptyValue: an empty string under a key's name is not a value
// Encode makes: Head and Get each count it (Stats.Corrupt) and delete it,
// as wire/PROTOCOL.md says of a value that fails its checks. Before, Head
// took it for an absent name (STRLEN 0): neither counted nor deleted.
// Load reads by GETRANGE, which cannot tell an empty string from an
// absent name: it loads nothing (a miss), and the next Head deletes it.
func TestRedisEmptyValue(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	tier, r := newTier(t, srv.URL(), l2.Options{})
	ctx := t.Context()
	keys := keysN("empty", 1)
	name := l2.StoreKey(l2.DefaultPrefix, &keys[0])
	for i, read := range []func(){
		func() { tier.Head(ctx, keys) },
		func() { tier.Get(ctx, keys) },
	} {
		if err := r.Client().Set(ctx, name, "", 0).Err(); err != nil {
			t.Fatal(err)
		}
		read()
		n, err := r.Client().Exists(ctx, name).Result()
		if s := tier.Stats(); err != nil || s.Corrupt != uint64(i+1) || n != 0 {
			t.Fatalf("read %d of an empty value: corrupt %d, still there %d, %v", i, s.Corrupt, n, err)
		}
	}
	if err := r.Client().Set(ctx, name, "", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ok := tier.Load(ctx, keys, [][]byte{make([]byte, 10)}); ok[0] {
		t.Fatal("Load of an empty value loaded it")
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
