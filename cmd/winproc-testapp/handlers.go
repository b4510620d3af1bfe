package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// server holds the HTTP handlers of serve and what they share.
type server struct {
	pid      int
	hostname string
	environ  func() []string
	// exit is called with the status /exit asked for, after the reply has
	// been written and flushed; serve stops the server and exits with it.
	exit func(code int)
	log  io.Writer // one line a request

	mu   sync.Mutex
	held [][]byte // what /alloc allocated, 1 MiB a slice, kept until exit
}

// Limits on one request's work.
const maxBurnMillis = 60_000

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.hello)
	mux.HandleFunc("GET /env", s.env)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /exit", s.exitHandler)
	mux.HandleFunc("GET /burn", s.burn)
	mux.HandleFunc("GET /alloc", s.alloc)
	return s.logRequests(mux)
}

func (s *server) hello(w http.ResponseWriter, r *http.Request) {
	text(w, fmt.Sprintf("hello from %s (pid %d, host %s)\n", name, s.pid, s.hostname))
}

func (s *server) env(w http.ResponseWriter, r *http.Request) {
	text(w, sortedEnv(s.environ()))
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	text(w, "ok")
}

func (s *server) exitHandler(w http.ResponseWriter, r *http.Request) {
	code := 0
	if v := r.URL.Query().Get("code"); v != "" {
		var err error
		if code, err = parseStatus(v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	// A complete, flushed reply reaches the client even though the process
	// ends right after.
	w.Header().Set("Connection", "close")
	text(w, fmt.Sprintf("exiting with status %d\n", code))
	if err := http.NewResponseController(w).Flush(); err != nil {
		return // the client is gone; it did not get its reply
	}
	s.exit(code)
}

func (s *server) burn(w http.ResponseWriter, r *http.Request) {
	ms, ok := intParam(w, r, "ms", maxBurnMillis)
	if !ok {
		return
	}
	d := time.Duration(ms) * time.Millisecond
	before, err := cpuTime()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	start := time.Now()
	spin(d, func() bool { return r.Context().Err() != nil })
	wall := time.Since(start)
	after, err := cpuTime()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	text(w, fmt.Sprintf("burned wall=%v cpu=%v\n", wall.Round(time.Millisecond), (after-before).Round(time.Millisecond)))
}

func (s *server) alloc(w http.ResponseWriter, r *http.Request) {
	mb, ok := intParam(w, r, "mb", maxAllocMiB)
	if !ok {
		return
	}
	mem := allocMiB(mb)
	s.mu.Lock()
	s.held = append(s.held, mem...)
	total := len(s.held)
	s.mu.Unlock()
	text(w, fmt.Sprintf("holding %d MiB\n", total))
}

// intParam returns the required query parameter key, a decimal number from
// 0 to max; it replies 400 and returns false when there is none such.
func intParam(w http.ResponseWriter, r *http.Request, key string, max int) (int, bool) {
	v := r.URL.Query().Get(key)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		http.Error(w, fmt.Sprintf("invalid %s=%q: want 0..%d", key, v, max), http.StatusBadRequest)
		return 0, false
	}
	return n, true
}

// text replies with body as plain text of a known length.
func text(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	io.WriteString(w, body)
}

// logRequests logs one line a request to s.log once it has been served.
func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		fmt.Fprintf(s.log, "%s %s %s %d %dB %v\n", r.RemoteAddr, r.Method, r.URL.RequestURI(), rec.status, rec.bytes, time.Since(start).Round(time.Microsecond))
	})
}

// recorder notes the status and size of a reply.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
