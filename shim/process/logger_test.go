package process

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/compute"
)

// TestMain lets the test binary be the logging binary of its own tests.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "test-logger" && os.Getenv("CONTAINER_ID") != "" {
		if err := runTestLogger(os.Args[2]); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runTestLogger is a logging binary: it copies its stdout and stderr
// inputs to the files stdout and stderr in dir, and its container
// variables to env.
func runTestLogger(dir string) error {
	stdout, stderr, ready, err := loggerInputs()
	if err != nil {
		return err
	}
	env := "CONTAINER_ID=" + os.Getenv("CONTAINER_ID") + "\nCONTAINER_NAMESPACE=" + os.Getenv("CONTAINER_NAMESPACE") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(env), 0o644); err != nil {
		return err
	}
	ready.Close()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, in := range []struct {
		r    io.Reader
		name string
	}{{stdout, "stdout"}, {stderr, "stderr"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := io.ReadAll(in.r)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, in.name), b, 0o644)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// uriPathOf is how containerd's cio.LogURIGenerator writes path into a URI.
func uriPathOf(path string) string {
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

func TestParseLogURI(t *testing.T) {
	tests := []struct {
		goos   string // "" for every platform
		stdout string
		want   *logURI
		errIs  error
	}{
		{"", "", nil, nil},
		{"linux", "/run/containerd/fifo/1/ctr-stdout", nil, nil},
		{"windows", `\\.\pipe\containerd-ctr-stdout`, nil, nil},
		{"windows", `C:\logs\app.log`, nil, nil},
		{"linux", "binary:///usr/bin/logger?tag=app&verbose=&level=info", &logURI{binary: true, path: "/usr/bin/logger", args: []string{"level", "info", "tag", "app", "verbose"}}, nil},
		{"windows", "binary:///C:/Program%20Files/nerdctl/nerdctl.exe?_NERDCTL_INTERNAL_LOGGING=C:/ProgramData/nerdctl", &logURI{binary: true, path: `C:\Program Files\nerdctl\nerdctl.exe`, args: []string{"_NERDCTL_INTERNAL_LOGGING", "C:/ProgramData/nerdctl"}}, nil},
		{"linux", "file:///var/log/app/../ctr.log", &logURI{path: "/var/log/ctr.log"}, nil},
		{"windows", "file:///C:/logs/ctr.log", &logURI{path: `C:\logs\ctr.log`}, nil},
		{"", "fluentd://localhost:24224", nil, errdefs.ErrInvalidArgument},
		{"", "binary://host/usr/bin/logger", nil, errdefs.ErrInvalidArgument},
		{"", "binary:////server/share/logger.exe", nil, errdefs.ErrInvalidArgument},
		{"", "file://", nil, errdefs.ErrInvalidArgument},
		{"windows", "binary:///usr/bin/logger", nil, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		if tt.goos != "" && tt.goos != runtime.GOOS {
			continue
		}
		t.Run(tt.stdout, func(t *testing.T) {
			got, err := parseLogURI(tt.stdout)
			if tt.errIs != nil {
				if !errors.Is(err, tt.errIs) {
					t.Fatalf("parseLogURI = %+v, %v; want %v", got, err, tt.errIs)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseLogURI = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// startWithLogURI starts a process whose stdout and stderr are uri, writes
// to both as the backend would, and lets it exit.
func startWithLogURI(t *testing.T, uri string) {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	sys := newSystem(t)
	p := New("ctr1", &compute.ProcessSettings{CommandLine: `C:\app.exe`}, Stdio{Stdout: uri, Stderr: uri}, Hooks{})
	if err := p.Start(ctx, sys); err != nil {
		t.Fatalf("start with stdout %s: %v", uri, err)
	}
	ps := sys.Proc(0).Settings()
	if _, err := io.WriteString(ps.Stdout, "to stdout\n"); err != nil {
		t.Errorf("write stdout: %v", err)
	}
	if _, err := io.WriteString(ps.Stderr, "to stderr\n"); err != nil {
		t.Errorf("write stderr: %v", err)
	}
	sys.Proc(0).Exit(0)
	waitExit(t, p)
}

func TestBinaryLogURI(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := winetest.TempDir(t)
	uri := (&url.URL{Scheme: "binary", Path: uriPathOf(exe), RawQuery: url.Values{"test-logger": {dir}}.Encode()}).String()
	startWithLogURI(t, uri)
	for name, want := range map[string]string{
		"stdout": "to stdout\n",
		"stderr": "to stderr\n",
		"env":    "CONTAINER_ID=ctr1\nCONTAINER_NAMESPACE=k8s.io\n",
	} {
		// The exit is final only once the logger has exited.
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != want {
			t.Errorf("logger's %s = %q, %v; want %q", name, b, err, want)
		}
	}
}

func TestFileLogURI(t *testing.T) {
	dir := winetest.TempDir(t)
	path := filepath.Join(dir, "ctr.log")
	startWithLogURI(t, (&url.URL{Scheme: "file", Path: uriPathOf(path)}).String())
	if b, err := os.ReadFile(path); err != nil || string(b) != "to stdout\nto stderr\n" {
		t.Errorf("log file = %q, %v", b, err)
	}
}

func TestLogURIRefusesStdin(t *testing.T) {
	_, err := openStdio(context.Background(), "ctr1", Stdio{Stdin: "in", Stdout: "file:///tmp/x.log"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("stdin with a log URI: %v, want InvalidArgument", err)
	}
}

// TestMissingLogger refuses the start of a process whose logging binary
// cannot start, naming the binary.
func TestMissingLogger(t *testing.T) {
	dir := winetest.TempDir(t)
	uri := (&url.URL{Scheme: "binary", Path: uriPathOf(filepath.Join(dir, "missing-logger"))}).String()
	p := New("ctr1", &compute.ProcessSettings{}, Stdio{Stdout: uri, Stderr: uri}, Hooks{})
	if err := p.Start(context.Background(), newSystem(t)); err == nil || !strings.Contains(err.Error(), "missing-logger") {
		t.Errorf("start with a missing logging binary: %v", err)
	}
}

// Connect opens the process's stdio before Start (the task service
// connects an init process at task create): the log file is there at once,
// and Start writes through what Connect opened. Abandon closes what a
// process that never starts connected.
func TestConnectBeforeStartAndAbandon(t *testing.T) {
	ctx := context.Background()
	dir := winetest.TempDir(t)
	uriOf := func(name string) string {
		return (&url.URL{Scheme: "file", Path: uriPathOf(filepath.Join(dir, name))}).String()
	}

	p := New("p1", &compute.ProcessSettings{CommandLine: `C:\app.exe`}, Stdio{Stdout: uriOf("started.log")}, Hooks{})
	if err := p.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "started.log")); err != nil {
		t.Fatalf("Connect did not open the log: %v", err)
	}
	sys := newSystem(t)
	if err := p.Start(ctx, sys); err != nil {
		t.Fatal(err)
	}
	io.WriteString(sys.Proc(0).Settings().Stdout, "out\n")
	sys.Proc(0).Exit(0)
	waitExit(t, p)
	if b, err := os.ReadFile(filepath.Join(dir, "started.log")); err != nil || string(b) != "out\n" {
		t.Errorf("log = %q, %v", b, err)
	}

	q := New("p2", &compute.ProcessSettings{CommandLine: `C:\app.exe`}, Stdio{Stdout: uriOf("abandoned.log")}, Hooks{
		OnExit: func(context.Context, *Process, uint32) uint32 {
			t.Error("an abandoned process ran its exit hook")
			return 0
		},
	})
	if err := q.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	q.Abandon()
	if st := q.State(); st.Status != task.Status_STOPPED {
		t.Errorf("abandoned process is %v", st.Status)
	}
	if err := q.Start(ctx, newSystem(t)); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Start after Abandon: %v, want FailedPrecondition", err)
	}
	// The log file is closed: no descriptor of this process names it (on
	// Windows, where /proc is missing, an open file cannot be removed).
	log := filepath.Join(dir, "abandoned.log")
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == log {
			t.Errorf("descriptor %s still names the abandoned process's log", fd.Name())
		}
	}
	if err := os.Remove(log); err != nil {
		t.Errorf("remove the abandoned process's log: %v", err)
	}
}
