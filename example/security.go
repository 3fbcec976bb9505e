package main

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/replog-io/replog"
)

// countSet counts the non-empty strings.
func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// applyAuth sets the Options' peer authentication from the command line:
// the secret from -secret-file, mutual TLS from -tls-*, or Insecure.
func applyAuth(cfg config, o *replog.Options) error {
	if cfg.secretFile != "" {
		secret, err := readSecretFile(cfg.secretFile)
		if err != nil {
			return err
		}
		o.Secret = secret
	}
	if cfg.tlsCert != "" {
		tc, err := mutualTLS(cfg.tlsCert, cfg.tlsKey, cfg.tlsCA)
		if err != nil {
			return err
		}
		o.TLS = tc
		// Bind certificates to node IDs: a member cannot speak for another.
		o.TLSVerifyNodeID = true
	}
	o.Insecure = cfg.insecure
	return nil
}

// readSecretFile reads a cluster secret. Like ssh with its keys, it refuses
// a file that others than its owner may read. One trailing newline (as
// echo or an editor leaves) is not part of the secret.
func readSecretFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("-secret-file: %w", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("-secret-file %s has mode %v: others may read it (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-secret-file: %w", err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) < replog.MinSecretLen {
		return nil, fmt.Errorf("-secret-file %s holds %d bytes; the secret must be at least %d (e.g. head -c 32 /dev/urandom | base64 > %s)",
			path, len(b), replog.MinSecretLen, path)
	}
	return b, nil
}

// writeSecretFile creates dir/name holding a fresh random secret (32
// random bytes as hex, so it can be shown and copied), readable by the
// owner only, and returns its path.
func writeSecretFile(dir, name string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = fmt.Fprintf(f, "%x\n", raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return path, nil
}

// mutualTLS builds the node's TLS config: its certificate both to serve
// and to dial, and the CA both to verify servers and to require and verify
// client certificates.
func mutualTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("-tls-ca: no PEM certificate found in " + caFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
