package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// shutdownGrace bounds how long serve waits for requests in flight when it
// stops.
const shutdownGrace = 5 * time.Second

func (p *program) serve(args []string) int {
	fs := p.flagSet("serve", "[-addr host:port]")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	if c := p.parse(fs, args); c >= 0 {
		return c
	}
	events, stop := p.notify()
	defer stop()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: serve: %v\n", name, err)
		return 1
	}
	out := &lockedWriter{w: p.stdout}
	host, _ := os.Hostname()
	exits := make(chan int, 1)
	s := &server{
		pid:      os.Getpid(),
		hostname: host,
		environ:  os.Environ,
		log:      out,
		exit: func(code int) {
			select {
			case exits <- code:
			default: // an earlier /exit wins
			}
		},
	}
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(p.stderr, name+": http: ", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "listening on %s\n", ln.Addr())

	code := 0
	select {
	case sig := <-events:
		fmt.Fprintf(out, "stopping: %s\n", eventName(sig))
	case code = <-exits:
	case err := <-served:
		fmt.Fprintf(p.stderr, "%s: serve: %v\n", name, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		fmt.Fprintf(p.stderr, "%s: shutdown: %v\n", name, err)
		srv.Close()
	}
	// Printed after Shutdown, so after the /exit request's log line. It is
	// the app's last word: a runtime that reports another status lost it.
	fmt.Fprintf(out, "exiting with status %d\n", code)
	return code
}

// lockedWriter serializes writes from concurrent requests, so log lines do
// not interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
