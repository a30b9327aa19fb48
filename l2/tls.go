package l2

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig is the client TLS configuration of a rediss:// L2: the
// servers' certificates are checked against the CA certificates (PEM) in
// caFile, or the system's roots when it is empty, and against the host
// each address names (an IP address in a certificate's IP SANs, for a
// cluster's nodes, which announce IP addresses); with certFile and
// keyFile the client presents that certificate (PEM), which a Redis with
// tls-auth-clients yes (its default) requires. TLS 1.2 at least.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("l2: TLS CA file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("l2: TLS CA file %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("l2: a TLS client certificate needs both its certificate and its key file (got %q and %q)", certFile, keyFile)
	}
	if certFile != "" {
		if _, err := ReadSecretFile(keyFile); err != nil {
			return nil, fmt.Errorf("l2: TLS client key: %w", err)
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("l2: TLS client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
