// Command tlsserver is a minimal HTTPS-ish TLS server used by tlsperf's
// integration tests as a real TLS peer.
//
// It prints exactly one line, "listening on ADDR", to stdout once the
// listener is bound, then serves until SIGTERM/SIGINT or until -duration
// elapses. Every connection gets an explicit handshake, one HTTP/1.x request
// head is read, and a fixed "ok" response is written before closing.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	connDeadline = 10 * time.Second
	maxHead      = 64 << 10
	response     = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
	streamLimit  = 60 * time.Second
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

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("tlsserver: ")
	log.SetOutput(os.Stderr)

	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	certFile := flag.String("cert", "", "certificate chain PEM file (required)")
	keyFile := flag.String("key", "", "private key PEM file (required)")
	getcertSleep := flag.Duration("getcert-sleep", 0, "if >0, serve the certificate from GetCertificate after sleeping this long")
	getcertBurn := flag.Duration("getcert-burn", 0, "if >0, serve the certificate from GetCertificate after running a CPU-bound loop for this long (on CPU, never parked)")
	acceptSleep := flag.Duration("accept-sleep", 0, "sleep this long after Accept before the handshake")
	tickets := flag.Bool("tickets", true, "enable session tickets")
	maxVersion := flag.String("max-version", "1.3", "maximum TLS version: 1.2 or 1.3")
	duration := flag.Duration("duration", 5*time.Minute, "exit after this long")
	wrap := flag.Bool("wrap", false, "hand the TLS server a wrapping net.Conn (a byte-counting struct embedding the accepted connection, as metrics, connection-limit and proxy-protocol listeners do) instead of the bare *net.TCPConn")
	stackSweep := flag.Bool("stack-sweep", false, "call Handshake under a call chain whose depth sweeps 0..299 frames over the connections, so that a new goroutine's stack grows at varying points of the handshake, its functions' entries included (runtime.morestack restarting a function)")
	switchable := flag.Bool("switch", false, "start with -getcert-sleep, -getcert-burn and -accept-sleep off: SIGUSR1 turns -getcert-sleep and -getcert-burn on or off, SIGUSR2 -accept-sleep (a known change at a known instant)")
	flag.DurationVar(&linger, "linger", 0, "wait this long after the response before closing the connection (its close_notify then comes that much later)")
	stream := flag.String("stream", "", "a hostile answer sent without end (for 60 s at most): early-hints (endless 103 responses), trailers (a chunked body whose trailer never ends) or chunks (endless 1-byte chunks)")
	flag.Parse()

	if flag.NArg() != 0 {
		log.Fatalf("unexpected arguments: %q", flag.Args())
	}
	if *certFile == "" || *keyFile == "" {
		log.Fatal("-cert and -key are required")
	}
	maxVer, err := parseVersion(*maxVersion)
	if err != nil {
		log.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatalf("loading key pair: %v", err)
	}

	cfg := &tls.Config{
		MinVersion:             tls.VersionTLS12,
		MaxVersion:             maxVer,
		SessionTicketsDisabled: !*tickets,
	}
	certOn.Store(!*switchable)
	acceptOn.Store(!*switchable)
	if *switchable {
		toggles := make(chan os.Signal, 4)
		signal.Notify(toggles, syscall.SIGUSR1, syscall.SIGUSR2)
		go func() {
			for s := range toggles {
				on := &certOn
				if s == syscall.SIGUSR2 {
					on = &acceptOn
				}
				on.Store(!on.Load())
				log.Printf("%s: getcert-sleep on %v, accept-sleep on %v", s, certOn.Load(), acceptOn.Load())
			}
		}()
	}
	if d, b := *getcertSleep, *getcertBurn; d > 0 || b > 0 {
		cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if certOn.Load() {
				time.Sleep(d)
				burn(b)
			}
			return &cert, nil
		}
	} else {
		cfg.Certificates = []tls.Certificate{cert}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}

	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "listening on %s\n", ln.Addr())
	if err := out.Flush(); err != nil {
		log.Fatalf("writing address line: %v", err)
	}

	var (
		stopOnce sync.Once
		stopping = make(chan struct{})
	)
	stop := func(reason string) {
		stopOnce.Do(func() {
			log.Printf("stopping: %s", reason)
			close(stopping)
			ln.Close()
		})
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case s := <-sigs:
			stop("signal " + s.String())
		case <-time.After(*duration):
			stop("duration elapsed")
		}
	}()

	for {
		raw, err := ln.Accept()
		if err != nil {
			select {
			case <-stopping:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Most likely a transient error such as EMFILE; back off briefly.
			log.Printf("accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if *wrap {
			raw = &countingConn{Conn: raw}
		}
		depth := 0
		if *stackSweep {
			depth = int(accepted % 300)
		}
		accepted++
		go handle(raw, cfg, *acceptSleep, *stream, depth)
	}
}

// burn runs a CPU-bound loop until its thread has spent d of CPU time (not wall time: on
// a busy machine the loop takes longer, never less CPU). The goroutine is locked to its
// thread meanwhile, so that the thread's CPU time is the goroutine's; it never sleeps,
// takes a lock or does I/O.
//
//go:noinline
func burn(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	x := uint64(1)
	for threadCPU()-start < d {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink[0] = byte(x)
}

// threadCPU is the calling thread's CPU time, user and system (getrusage RUSAGE_THREAD).
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		log.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Whether -getcert-sleep, -getcert-burn and -accept-sleep apply now (-switch toggles them).
var certOn, acceptOn atomic.Bool

// Connections accepted (-stack-sweep's depth), and what keeps deep's frames in use.
var (
	accepted int64
	sink     [64]byte
)

// deep calls f under n frames of about 80 bytes each.
//
//go:noinline
func deep(n int, f func() error) error {
	var pad [40]byte
	pad[n%40] = byte(n)
	if n == 0 {
		return f()
	}
	err := deep(n-1, f)
	sink[n%64] = pad[n%40]
	return err
}

// countingConn is a wrapping listener's connection: it counts the bytes that cross it.
type countingConn struct {
	net.Conn
	read, written int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read += int64(n)
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written += int64(n)
	return n, err
}

// linger is -linger: how long a connection stays open after its response.
var linger time.Duration

func handle(raw net.Conn, cfg *tls.Config, acceptSleep time.Duration, stream string, depth int) {
	defer raw.Close()
	peer := raw.RemoteAddr()
	if err := raw.SetDeadline(time.Now().Add(connDeadline)); err != nil {
		log.Printf("%s: set deadline: %v", peer, err)
		return
	}
	if acceptSleep > 0 && acceptOn.Load() {
		time.Sleep(acceptSleep)
	}

	tlsConn := tls.Server(raw, cfg)
	defer tlsConn.Close()
	if err := deep(depth, tlsConn.Handshake); err != nil {
		log.Printf("%s: handshake: %v", peer, err)
		return
	}

	if err := readHead(tlsConn); err != nil {
		log.Printf("%s: reading request head: %v", peer, err)
		return
	}
	if stream != "" {
		endless(tlsConn, stream)
		return
	}
	if _, err := tlsConn.Write([]byte(response)); err != nil {
		log.Printf("%s: writing response: %v", peer, err)
		return
	}
	time.Sleep(linger)
}

// endless sends an answer that never ends, until the peer goes or 60 s pass.
func endless(c net.Conn, mode string) {
	if err := c.SetDeadline(time.Now().Add(streamLimit)); err != nil {
		return
	}
	var head, unit string
	switch mode {
	case "early-hints":
		unit = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
	case "trailers":
		head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"
		unit = "X-Trailer: 1\r\n"
	case "chunks":
		head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		unit = "1\r\nx\r\n"
	default:
		log.Printf("unknown -stream %q", mode)
		return
	}
	if _, err := c.Write([]byte(head)); err != nil {
		return
	}
	batch := []byte(strings.Repeat(unit, 256))
	for {
		if _, err := c.Write(batch); err != nil {
			return
		}
	}
}

// readHead reads until the end of an HTTP/1.x request head ("\r\n\r\n"),
// bounded at maxHead bytes. The connection deadline bounds the time spent.
func readHead(c net.Conn) error {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	for {
		n, err := c.Read(tmp)
		if n > 0 {
			// Only the tail can contain a terminator spanning the old/new boundary.
			start := len(buf) - 3
			if start < 0 {
				start = 0
			}
			buf = append(buf, tmp[:n]...)
			if bytes.Contains(buf[start:], []byte("\r\n\r\n")) {
				return nil
			}
			if len(buf) >= maxHead {
				return fmt.Errorf("request head exceeds %d bytes", maxHead)
			}
		}
		if err != nil {
			return err
		}
	}
}
