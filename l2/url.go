package l2

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Mode is how a Redis client talks to the Redis its URL names.
type Mode int

const (
	// ModeAuto: several seeds are a cluster; one seed is asked (INFO
	// cluster), and while it does not answer, asked again at each call
	// until it does (RedisOptions; the choice is logged).
	ModeAuto Mode = iota
	// ModeCluster: a Redis Cluster (redis+cluster://).
	ModeCluster
	// ModePlain: one plain Redis (redis+plain://).
	ModePlain
)

func (m Mode) String() string {
	switch m {
	case ModeCluster:
		return "cluster"
	case ModePlain:
		return "plain"
	}
	return "auto"
}

// URL is a parsed L2 URL (kvallocd's -l2).
type URL struct {
	// Addrs are the seeds, host:port each.
	Addrs []string
	// TLS: a rediss scheme.
	TLS bool
	// Mode: from the scheme's +cluster or +plain, else ModeAuto.
	Mode Mode
	// Username is the Redis ACL user (the URL's user@), or "" for the
	// default user.
	Username string
}

// ParseURL reads an L2 URL:
//
//	redis[s][+cluster|+plain]://[user@]host:port[,host:port...][/]
//
// rediss is TLS; +cluster says the seeds are a Redis Cluster's, +plain
// that the one seed is a plain Redis; without either, several seeds are a
// cluster and one is asked. user is a Redis ACL user. Anything else is
// refused: a password (it belongs in a file, kvallocd's
// -l2-password-file, never in a URL that argv and logs show), a database
// number or path, a query, a fragment.
func ParseURL(s string) (URL, error) {
	const want = "want redis[s][+cluster|+plain]://[user@]host:port[,host:port...]"
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the whole URL, a password included: say less.
		return URL{}, fmt.Errorf("l2: %q is not a URL (%s)", redact(s), want)
	}
	var out URL
	scheme, mode, _ := strings.Cut(u.Scheme, "+")
	switch scheme {
	case "redis":
	case "rediss":
		out.TLS = true
	default:
		return URL{}, fmt.Errorf("l2: %q: scheme %q: %s", redact(s), u.Scheme, want)
	}
	switch {
	case !strings.Contains(u.Scheme, "+"):
		out.Mode = ModeAuto
	case mode == "cluster":
		out.Mode = ModeCluster
	case mode == "plain":
		out.Mode = ModePlain
	default:
		return URL{}, fmt.Errorf("l2: %q: scheme %q: %s", redact(s), u.Scheme, want)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			return URL{}, fmt.Errorf("l2: %q: a password in the URL is refused (argv and logs show it): put it in a file of mode 0600 and name it with -l2-password-file", redact(s))
		}
		out.Username = u.User.Username()
		if out.Username == "" {
			return URL{}, fmt.Errorf("l2: %q: an empty user name", redact(s))
		}
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return URL{}, fmt.Errorf("l2: %q: a database number, path, query or fragment is not used (a Redis Cluster has database 0 alone; options are kvallocd's flags): %s", redact(s), want)
	}
	if u.Host == "" {
		return URL{}, fmt.Errorf("l2: %q: no address: %s", redact(s), want)
	}
	for _, a := range strings.Split(u.Host, ",") {
		if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" {
			return URL{}, fmt.Errorf("l2: %q: address %q is not host:port: %s", redact(s), a, want)
		}
		out.Addrs = append(out.Addrs, a)
	}
	if out.Mode == ModePlain && len(out.Addrs) > 1 {
		return URL{}, fmt.Errorf("l2: %q: +plain names one Redis, not %d", redact(s), len(out.Addrs))
	}
	return out, nil
}

// redact is s with any password between "://" and "@" replaced by
// xxxxx, and any query (which may name one) by "?...".
func redact(s string) string {
	if q := strings.IndexAny(s, "?#"); q >= 0 {
		s = s[:q] + "?..."
	}
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	user, _, hasPw := strings.Cut(rest[:at], ":")
	if !hasPw {
		return s
	}
	return s[:i+3] + user + ":xxxxx" + rest[at:]
}
