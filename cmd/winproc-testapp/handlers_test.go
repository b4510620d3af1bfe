package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testServer returns a server with fixed identity and environment whose
// exits and log lines the test can read.
func testServer() (*server, *[]int, *strings.Builder) {
	var exits []int
	var log strings.Builder
	s := &server{
		pid:      42,
		hostname: "testhost",
		environ:  func() []string { return []string{"ZED=1", "A=x=y", "PATH=C:\\Windows", "B="} },
		exit:     func(code int) { exits = append(exits, code) },
		log:      &log,
	}
	return s, &exits, &log
}

func TestHandlers(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		target     string
		wantStatus int
		wantBody   string         // exact, unless wantMatch is set
		wantMatch  *regexp.Regexp // the body must match
		wantExits  []int
	}{
		{name: "hello", target: "/", wantStatus: 200, wantBody: "hello from winproc-testapp (pid 42, host testhost)\n"},
		{name: "env sorted", target: "/env", wantStatus: 200, wantBody: "A=x=y\nB=\nPATH=C:\\Windows\nZED=1\n"},
		{name: "healthz", target: "/healthz", wantStatus: 200, wantBody: "ok"},
		{name: "head healthz", method: "HEAD", target: "/healthz", wantStatus: 200, wantMatch: regexp.MustCompile("^(ok)?$")}, // a real server drops the body
		{name: "unknown path", target: "/nope", wantStatus: 404, wantMatch: regexp.MustCompile("(?i)not found")},
		{name: "post", method: "POST", target: "/healthz", wantStatus: 405, wantMatch: regexp.MustCompile("(?i)not allowed")},
		{name: "exit", target: "/exit?code=7", wantStatus: 200, wantBody: "exiting with status 7\n", wantExits: []int{7}},
		{name: "exit default", target: "/exit", wantStatus: 200, wantBody: "exiting with status 0\n", wantExits: []int{0}},
		{name: "exit 255", target: "/exit?code=255", wantStatus: 200, wantBody: "exiting with status 255\n", wantExits: []int{255}},
		{name: "exit 256", target: "/exit?code=256", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid exit status "256"`)},
		{name: "exit negative", target: "/exit?code=-1", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid exit status "-1"`)},
		{name: "exit word", target: "/exit?code=x", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid exit status "x"`)},
		{name: "burn", target: "/burn?ms=30", wantStatus: 200, wantMatch: regexp.MustCompile(`^burned wall=\d+ms cpu=\d+(\.\d+)?m?s\n$`)},
		// A zero burn does not spin: its wall time is the timer's resolution
		// at most (a tick of 1 ms under Wine), well under 50 ms.
		{name: "burn zero", target: "/burn?ms=0", wantStatus: 200, wantMatch: regexp.MustCompile(`^burned wall=(0s|[1-4]?[0-9]ms) cpu=`)},
		{name: "burn no ms", target: "/burn", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid ms=""`)},
		{name: "burn too long", target: "/burn?ms=60001", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid ms="60001": want 0..60000`)},
		{name: "burn negative", target: "/burn?ms=-5", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid ms="-5"`)},
		{name: "alloc", target: "/alloc?mb=3", wantStatus: 200, wantBody: "holding 3 MiB\n"},
		{name: "alloc zero", target: "/alloc?mb=0", wantStatus: 200, wantBody: "holding 0 MiB\n"},
		{name: "alloc no mb", target: "/alloc", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid mb=""`)},
		{name: "alloc too much", target: "/alloc?mb=16385", wantStatus: 400, wantMatch: regexp.MustCompile(`invalid mb="16385": want 0..16384`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, exits, log := testServer()
			method := tt.method
			if method == "" {
				method = "GET"
			}
			w := httptest.NewRecorder()
			s.handler().ServeHTTP(w, httptest.NewRequest(method, tt.target, nil))

			if w.Code != tt.wantStatus {
				t.Errorf("status %d, want %d (body %q)", w.Code, tt.wantStatus, w.Body)
			}
			body := w.Body.String()
			if tt.wantMatch != nil {
				if !tt.wantMatch.MatchString(body) {
					t.Errorf("body %q, want a match for %v", body, tt.wantMatch)
				}
			} else if body != tt.wantBody {
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
			if len(*exits) != len(tt.wantExits) || len(tt.wantExits) > 0 && (*exits)[0] != tt.wantExits[0] {
				t.Errorf("exit called with %v, want %v", *exits, tt.wantExits)
			}
			// One log line, naming the request and its status.
			wantLog := regexp.MustCompile(`^192\.0\.2\.1:1234 ` + method + ` ` + regexp.QuoteMeta(tt.target) + ` ` + strconv.Itoa(tt.wantStatus) + ` \d+B \S+\n$`)
			if !wantLog.MatchString(log.String()) {
				t.Errorf("log %q, want a match for %v", log.String(), wantLog)
			}
		})
	}
}

func TestBurnUsesCPU(t *testing.T) {
	s, _, _ := testServer()
	w := httptest.NewRecorder()
	s.handler().ServeHTTP(w, httptest.NewRequest("GET", "/burn?ms=200", nil))
	m := regexp.MustCompile(`^burned wall=(\S+) cpu=(\S+)\n$`).FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("body %q", w.Body)
	}
	wall, err1 := time.ParseDuration(m[1])
	cpu, err2 := time.ParseDuration(m[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("body %q: %v, %v", w.Body, err1, err2)
	}
	if wall < 200*time.Millisecond || wall > 5*time.Second {
		t.Errorf("wall time %v, want 200ms or a little more", wall)
	}
	// The spin loop runs all along, but a busy test machine may not give
	// it a whole core: two test runs at once on 2 cores gave it 47 ms. A
	// burn that slept would use well under a millisecond.
	if cpu < 10*time.Millisecond {
		t.Errorf("CPU time %v for a 200ms burn", cpu)
	}
}

func TestBurnStopsWithClient(t *testing.T) {
	s, _, _ := testServer()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	s.handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/burn?ms=60000", nil))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("burn ran %v after its client went away", took)
	}
}

func TestAllocAccumulates(t *testing.T) {
	s, _, _ := testServer()
	h := s.handler()
	for i, tt := range []struct {
		mb   int
		want string
	}{{2, "holding 2 MiB\n"}, {0, "holding 2 MiB\n"}, {5, "holding 7 MiB\n"}} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/alloc?mb="+strconv.Itoa(tt.mb), nil))
		if w.Code != 200 || w.Body.String() != tt.want {
			t.Errorf("request %d: %d %q, want 200 %q", i, w.Code, w.Body, tt.want)
		}
	}
	if len(s.held) != 7 {
		t.Fatalf("holding %d slices, want 7", len(s.held))
	}
	for i, b := range s.held {
		if len(b) != mib || b[0] != 1 || b[mib-4096] != 1 {
			t.Fatalf("slice %d: %d bytes, not touched", i, len(b))
		}
	}
}

// TestExitReplyArrives checks over a real connection that the client gets
// the whole /exit reply by the time exit is called.
func TestExitReplyArrives(t *testing.T) {
	s, _, _ := testServer()
	called := make(chan int, 1)
	s.exit = func(code int) {
		called <- code
		// Block like a process that is about to end: the reply must already
		// be on the wire.
		time.Sleep(200 * time.Millisecond)
	}
	ts := httptest.NewServer(s.handler())
	defer ts.Close()

	resp, err := http.Get(ts.URL + "/exit?code=3")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case code := <-called:
		if code != 3 {
			t.Errorf("exit(%d), want exit(3)", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exit not called")
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "exiting with status 3\n" {
		t.Errorf("body %q, %v; want %q", body, err, "exiting with status 3\n")
	}
	if !resp.Close {
		t.Errorf("reply keeps the connection open")
	}
}
