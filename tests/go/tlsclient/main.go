// Command tlsclient is a minimal TLS client used by tlsperf's integration
// tests as a real TLS peer.
//
// It makes -n sequential connections, each with an explicit handshake, one
// HTTP/1.1 GET, and a read to EOF. On success it prints exactly one line,
// "ok N resumed R", to stdout and exits 0. On the first failure it prints the
// error to stderr and exits 1.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

const (
	connTimeout = 10 * time.Second
	maxConns    = 100000
)

func parseVersion(s string) (uint16, error) {
	switch s {
	case "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("unsupported -max-version %q (want 1.2 or 1.3)", s)
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "tlsclient: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	addr := flag.String("addr", "", "server HOST:PORT (required)")
	n := flag.Int("n", 10, fmt.Sprintf("number of connections (1..%d)", maxConns))
	caFile := flag.String("ca", "", "root CA PEM file to trust (default: system roots)")
	serverName := flag.String("server-name", "localhost", "SNI and verification name; also the Host header")
	resume := flag.Bool("resume", false, "share a ClientSessionCache across connections")
	maxVersion := flag.String("max-version", "1.3", "maximum TLS version: 1.2 or 1.3")
	poolPerConn := flag.String("pool-per-conn", "", "PEM bundle read and parsed into a new root pool before every connection (replaces -ca); several, comma-separated, are taken in turn: connection i loads the (i mod count)-th")
	poolTimes := flag.Bool("pool-times", false, "with -pool-per-conn: print on stderr, for each pool built, the time AppendCertsFromPEM took, timed around the call (\"pool N ms\")")
	certFile := flag.String("cert", "", "client certificate chain PEM file, presented when the server asks (needs -key)")
	keyFile := flag.String("key", "", "private key PEM file of -cert")
	flag.Parse()

	if flag.NArg() != 0 {
		fail("unexpected arguments: %q", flag.Args())
	}
	if *addr == "" {
		fail("-addr is required")
	}
	if *n < 1 || *n > maxConns {
		fail("-n must be between 1 and %d, got %d", maxConns, *n)
	}
	maxVer, err := parseVersion(*maxVersion)
	if err != nil {
		fail("%v", err)
	}

	cfg := &tls.Config{
		ServerName: *serverName,
		MinVersion: tls.VersionTLS12,
		MaxVersion: maxVer,
	}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fail("reading -ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail("no certificates found in %s", *caFile)
		}
		cfg.RootCAs = pool
	}
	if (*certFile == "") != (*keyFile == "") {
		fail("-cert and -key go together")
	}
	if *certFile != "" {
		pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fail("loading -cert/-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	var bundles []string
	if *poolPerConn != "" {
		bundles = strings.Split(*poolPerConn, ",")
	}
	if *resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}

	request := []byte("GET / HTTP/1.1\r\nHost: " + *serverName + "\r\nConnection: close\r\n\r\n")
	dialer := &net.Dialer{Timeout: connTimeout}

	resumed := 0
	for i := 0; i < *n; i++ {
		if len(bundles) > 0 {
			// The bundle loaded for every connection, as a client that builds its
			// trust store per request does.
			bundle := bundles[i%len(bundles)]
			pem, err := os.ReadFile(bundle)
			if err != nil {
				fail("reading -pool-per-conn: %v", err)
			}
			pool := x509.NewCertPool()
			began := time.Now()
			appended := pool.AppendCertsFromPEM(pem)
			took := time.Since(began)
			if !appended {
				fail("no certificates found in %s", bundle)
			}
			if *poolTimes {
				fmt.Fprintf(os.Stderr, "pool %.3f ms\n", float64(took.Nanoseconds())/1e6)
			}
			cfg = cfg.Clone()
			cfg.RootCAs = pool
		}
		didResume, err := oneConn(dialer, *addr, cfg, request)
		if err != nil {
			fail("connection %d of %d: %v", i+1, *n, err)
		}
		if didResume {
			resumed++
		}
	}
	fmt.Printf("ok %d resumed %d\n", *n, resumed)
}

func oneConn(dialer *net.Dialer, addr string, cfg *tls.Config, request []byte) (bool, error) {
	raw, err := dialer.Dial("tcp", addr)
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	defer raw.Close()
	if err := raw.SetDeadline(time.Now().Add(connTimeout)); err != nil {
		return false, fmt.Errorf("set deadline: %w", err)
	}

	conn := tls.Client(raw, cfg)
	defer conn.Close()
	if err := conn.Handshake(); err != nil {
		return false, fmt.Errorf("handshake: %w", err)
	}
	didResume := conn.ConnectionState().DidResume

	if _, err := conn.Write(request); err != nil {
		return didResume, fmt.Errorf("write request: %w", err)
	}
	resp, err := io.ReadAll(conn)
	if err != nil {
		return didResume, fmt.Errorf("read response: %w", err)
	}
	if len(resp) == 0 {
		return didResume, errors.New("read response: empty response")
	}
	return didResume, nil
}
