//go:build linux

package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	taskv3 "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/ttrpc"

	"github.com/winproc/winproc/internal/procscan"
	"github.com/winproc/winproc/internal/syncbuffer"
)

// TaskClient is a direct ttrpc connection to a shim's task API (v3).
type TaskClient struct {
	taskv3.TTRPCTaskService
	client *ttrpc.Client
}

// DialTask connects to the task API a shim serves on socket.
func DialTask(ctx context.Context, socket string) (*TaskClient, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	c := ttrpc.NewClient(conn)
	return &TaskClient{TTRPCTaskService: taskv3.NewTTRPCTaskClient(c), client: c}, nil
}

// Close closes the connection.
func (c *TaskClient) Close() error { return c.client.Close() }

// Memory is what the kernel counts of a process's memory, in bytes.
type Memory struct {
	RSS uint64 // VmRSS of /proc/PID/status
	PSS uint64 // Pss of /proc/PID/smaps_rollup: shared pages divided among their users
}

// ProcessMemory reads pid's resident and proportional set sizes.
func ProcessMemory(pid int) (Memory, error) {
	var m Memory
	rss, err := procKB(filepath.Join("/proc", strconv.Itoa(pid), "status"), "VmRSS:")
	if err != nil {
		return m, err
	}
	pss, err := procKB(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"), "Pss:")
	if err != nil {
		return m, err
	}
	return Memory{RSS: rss, PSS: pss}, nil
}

// procKB reads the "key   N kB" line of a /proc file, in bytes.
func procKB(path, key string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && fields[0] == key && fields[2] == "kB" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", path, key, err)
			}
			return kb * 1024, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no %s line", path, key)
}

// ShimProcess is a shim's serving process started directly by the test,
// not by containerd: nothing of it is known to containerd.
type ShimProcess struct {
	Binary    string
	Namespace string
	ID        string
	Pid       int
	Socket    string // where it serves its task API
	Bundle    string // its working directory
	Dir       string // everything of it lives below Dir
	cmd       *exec.Cmd
	log       *syncbuffer.Buffer
	exited    chan struct{}
	once      sync.Once
}

// StartShim starts binary's serving process the way containerd and the
// shim's own `start` (its shim manager) start it: `binary -namespace NS -id
// ID -address <containerd's gRPC socket>`, in a process group of its own,
// its working directory a task bundle holding config.json and the shim log
// fifo (which stderr is sent to as well), the environment containerd gives
// shims (GOMAXPROCS=2, MAX_SHIM_VERSION, TTRPC_ADDRESS, GRPC_ADDRESS,
// NAMESPACE) followed by env, what the binary's shim manager adds (for
// containerd-shim-runc-v2 GOMAXPROCS=4 and OTEL_SERVICE_NAME; for ours
// GOMAXPROCS=2 and the runtime options), and the listening task socket as
// fd 3. It returns once the shim answers the task API's Connect with its
// own PID. The bundle mirrors containerd's layout below a fresh temporary
// directory: <dir>/state/io.containerd.runtime.v2.task/NS/ID.
//
// The shim is stopped (Shutdown, then SIGKILL to its PID), and its socket
// and directory removed, when the test ends, pass or fail.
func (n *Node) StartShim(t testing.TB, binary, namespace, id string, env ...string) *ShimProcess {
	t.Helper()
	// Unix socket paths are limited to 108 bytes: keep the directory short.
	dir, err := os.MkdirTemp("", "wps-")
	if err != nil {
		t.Fatal(err)
	}
	s := &ShimProcess{
		Binary:    binary,
		Namespace: namespace,
		ID:        id,
		Socket:    filepath.Join(dir, "shim.sock"),
		Bundle:    filepath.Join(dir, "state", "io.containerd.runtime.v2.task", namespace, id),
		Dir:       dir,
		log:       &syncbuffer.Buffer{},
		exited:    make(chan struct{}),
	}
	// Cleanups run last registered first: the shim is stopped, then its
	// log is drained and closed, then its directory goes.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", filepath.Base(binary), s.log.String())
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove shim directory: %v", err)
		}
	})
	logPath := s.makeBundle(t)
	socket := s.listen(t)
	defer socket.Close()

	s.cmd = exec.Command(binary, "-namespace", namespace, "-id", id, "-address", n.Address)
	s.cmd.Dir = s.Bundle
	s.cmd.Env = append(os.Environ(),
		"GOMAXPROCS=2",
		"MAX_SHIM_VERSION=2",
		"TTRPC_ADDRESS="+n.TTRPCAddress(),
		"GRPC_ADDRESS="+n.Address,
		"NAMESPACE="+namespace,
	)
	s.cmd.Env = append(s.cmd.Env, env...)
	// A handle of its own: exec puts the one it is given in blocking mode,
	// and a blocked read of the log fifo would then not end with Close.
	stderr, err := os.OpenFile(logPath, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	s.cmd.Stderr = stderr
	s.cmd.ExtraFiles = []*os.File{socket}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	s.Pid = s.cmd.Process.Pid
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() { s.Stop(t) })
	s.waitServing(t)
	return s
}

// makeBundle lays out the bundle as containerd does, with the log fifo
// containerd reads into the shim's log; it returns the fifo's path.
func (s *ShimProcess) makeBundle(t testing.TB) string {
	t.Helper()
	if err := os.MkdirAll(s.Bundle, 0o711); err != nil {
		t.Fatal(err)
	}
	// Neither serving process reads the spec (`start` does); it is there
	// as containerd leaves it.
	if err := os.WriteFile(filepath.Join(s.Bundle, "config.json"), []byte(`{"ociVersion":"1.2.1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// containerd makes the log fifo and reads it, opened read-write so the
	// shim's write-only open does not block.
	logPath := filepath.Join(s.Bundle, "log")
	if err := syscall.Mkfifo(logPath, 0o700); err != nil {
		t.Fatal(err)
	}
	logFifo, err := os.OpenFile(logPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		logFifo.WriteTo(s.log)
	}()
	t.Cleanup(func() {
		logFifo.Close()
		<-logDone
	})
	return logPath
}

// listen makes the task socket the shim gets as fd 3; the caller closes
// its file.
func (s *ShimProcess) listen(t testing.TB) *os.File {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.Socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	socket, err := l.File()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	return socket
}

// waitServing returns once the started shim answers Connect with its own
// PID, within 30 s.
func (s *ShimProcess) waitServing(t testing.TB) {
	t.Helper()
	name := filepath.Base(s.Binary)
	deadline := time.Now().Add(30 * time.Second)
	for {
		pid, err := s.connect()
		if err == nil {
			if pid != s.Pid {
				t.Fatalf("%s on %s reports shim PID %d, want %d", name, s.Socket, pid, s.Pid)
			}
			return
		}
		select {
		case <-s.exited:
			t.Fatalf("%s exited before serving: %v\n%s", name, s.cmd.ProcessState, s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer on %s: %v", name, s.Socket, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Context is a context in the shim's namespace, for calls to its task API.
func (s *ShimProcess) Context(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, s.Namespace)
}

// connect calls the task API's Connect and returns the shim PID it reports.
func (s *ShimProcess) connect() (int, error) {
	ctx, cancel := context.WithTimeout(s.Context(context.Background()), 5*time.Second)
	defer cancel()
	c, err := DialTask(ctx, s.Socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	resp, err := c.Connect(ctx, &taskv3.ConnectRequest{ID: s.ID})
	if err != nil {
		return 0, err
	}
	return int(resp.ShimPid), nil
}

// Log returns what the shim has logged so far.
func (s *ShimProcess) Log() string { return s.log.String() }

// Stop ends the shim as containerd would once it holds no task, with the
// task API's Shutdown, and SIGKILLs its PID if it has not exited within
// 10 s; it removes the socket. Stopping twice is harmless.
func (s *ShimProcess) Stop(t testing.TB) {
	s.once.Do(func() {
		if s.cmd == nil || s.cmd.Process == nil {
			return
		}
		defer os.Remove(s.Socket)
		select {
		case <-s.exited:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(s.Context(context.Background()), 5*time.Second)
		defer cancel()
		if c, err := DialTask(ctx, s.Socket); err == nil {
			// The shim may exit before it answers.
			c.Shutdown(ctx, &taskv3.ShutdownRequest{ID: s.ID})
			c.Close()
		}
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (PID %d) did not stop within 10 s of Shutdown; killing it", filepath.Base(s.Binary), s.Pid)
			syscall.Kill(s.Pid, syscall.SIGKILL)
			<-s.exited
		}
	})
}

// Alive lists the live processes still running this shim: its own PID
// until it has been reaped, and any process with its command line
// (binary, namespace and ID).
func (s *ShimProcess) Alive() []int {
	var pids []int
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.exited:
		default:
			pids = append(pids, s.Pid)
		}
	}
	want := []byte("\x00-namespace\x00" + s.Namespace + "\x00-id\x00" + s.ID + "\x00")
	return append(pids, procscan.Live(func(pid int, cmdline, _ []byte) bool {
		return pid != s.Pid && bytes.Contains(cmdline, want) && bytes.HasPrefix(cmdline, []byte(s.Binary+"\x00"))
	})...)
}

// Gone returns an error unless the shim's process and socket are gone.
func (s *ShimProcess) Gone() error {
	if pids := s.Alive(); len(pids) > 0 {
		return fmt.Errorf("%s still runs: PIDs %v", filepath.Base(s.Binary), pids)
	}
	if _, err := os.Stat(s.Socket); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: socket %s left behind (%v)", filepath.Base(s.Binary), s.Socket, err)
	}
	return nil
}
