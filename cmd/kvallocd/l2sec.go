package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/kvalloc/kvalloc/l2"
)

// l2SecFlags are kvallocd's flags for the L2's security: the MAC secret
// of the values, the Redis credentials and TLS. Every secret comes from a
// file (l2.ReadSecretFile's checks), never from argv.
type l2SecFlags struct {
	secretFile, oldSecretFile string
	noMAC                     bool
	passwordFile              string
	tlsCA, tlsCert, tlsKey    string
}

func (f *l2SecFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.secretFile, "l2-secret-file", "", "file of the MAC secret every node of the L2 shares (at least 32 bytes; mode 0600 or 0400, owned by the daemon's uid or root): values are written with its MAC and served only with a valid one; required with -l2 unless -l2-insecure-no-mac")
	fs.StringVar(&f.oldSecretFile, "l2-secret-file-old", "", "file of the previous MAC secret, during a rotation: values under it are still served, new ones are written under -l2-secret-file")
	fs.BoolVar(&f.noMAC, "l2-insecure-no-mac", false, "run -l2 without a MAC secret: values are written and read without MACs, and anyone who can write to the Redis can have its bytes served to the engines as KV cache")
	fs.StringVar(&f.passwordFile, "l2-password-file", "", "file of the Redis password (of the -l2 URL's ACL user, or of the default user); same checks as -l2-secret-file")
	fs.StringVar(&f.tlsCA, "l2-tls-ca-file", "", "with rediss://: PEM file of the CA certificates the Redis servers' certificates are checked against (default: the system's roots)")
	fs.StringVar(&f.tlsCert, "l2-tls-cert-file", "", "with rediss://: PEM file of the client certificate the daemon presents (Redis's tls-auth-clients, on by default, requires one); needs -l2-tls-key-file")
	fs.StringVar(&f.tlsKey, "l2-tls-key-file", "", "with rediss://: PEM file of the client certificate's key (same checks as -l2-secret-file)")
}

// open reads the files the flags name: the codec of the values and the
// Redis options (password, TLS, logger).
func (f *l2SecFlags) open(log *slog.Logger) (*l2.Codec, l2.RedisOptions, error) {
	var ropts l2.RedisOptions
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ropts.Logger = log
	var codec *l2.Codec
	switch {
	case f.secretFile != "" && f.noMAC:
		return nil, ropts, errors.New("-l2-secret-file and -l2-insecure-no-mac contradict each other")
	case f.secretFile == "" && f.oldSecretFile != "":
		return nil, ropts, errors.New("-l2-secret-file-old needs -l2-secret-file (the secret new values are written with)")
	case f.secretFile == "" && !f.noMAC:
		return nil, ropts, errors.New("-l2 needs -l2-secret-file, the MAC secret the nodes share, so that no one who can write to the Redis has its bytes served as KV cache " +
			"(docs/OPERATING.md, \"The L2's threat model\"); -l2-insecure-no-mac runs without one")
	case f.noMAC:
		codec = l2.Unauthenticated
		log.Warn("L2 without a MAC secret (-l2-insecure-no-mac): anyone who can write to the Redis can have its bytes served to the engines as KV cache")
	default:
		cur, err := l2.ReadSecret(f.secretFile)
		if err != nil {
			return nil, ropts, fmt.Errorf("-l2-secret-file: %w", err)
		}
		var old []*l2.Secret
		if f.oldSecretFile != "" {
			o, err := l2.ReadSecret(f.oldSecretFile)
			if err != nil {
				return nil, ropts, fmt.Errorf("-l2-secret-file-old: %w", err)
			}
			old = append(old, o)
		}
		if codec, err = l2.NewCodec(cur, old...); err != nil {
			return nil, ropts, fmt.Errorf("-l2-secret-file-old: %w", err)
		}
		args := []any{"key_id", fmt.Sprintf("%#x", cur.ID())}
		if len(old) > 0 {
			args = append(args, "old_key_id", fmt.Sprintf("%#x", old[0].ID()))
		}
		log.Info("L2 values are authenticated (HMAC-SHA-256; pieces' payloads AES-256-GMAC)", args...)
	}
	if f.passwordFile != "" {
		pw, err := l2.ReadSecretFile(f.passwordFile)
		if err != nil {
			return nil, ropts, fmt.Errorf("-l2-password-file: %w", err)
		}
		ropts.Password = string(pw)
	}
	if f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" {
		conf, err := l2.TLSConfig(f.tlsCA, f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, ropts, fmt.Errorf("-l2-tls-*: %w", err)
		}
		ropts.TLS = conf
	}
	return codec, ropts, nil
}
