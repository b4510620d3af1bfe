package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apitypes "github.com/containerd/containerd/api/types"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	taskv3 "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"

	"github.com/winproc/winproc/shim/options"
)

const testNamespace = "winproc-test"

// TestStartProtocols runs the shim binary's `start` as containerd 1.7 and as
// containerd 2.3+ do, and talks to the shim each starts. The shims are made
// in containerd's default socket directory, /run/containerd/s (containerd
// 1.7 passes none), under a fake containerd address of the test's own.
func TestStartProtocols(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the shim binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for the shim sockets in " + defaults.DefaultStateDir)
	}
	tmp := t.TempDir()
	e := &starts{bin: buildShim(t, tmp), socketDir: filepath.Join(defaults.DefaultStateDir, "s"), state: filepath.Join(tmp, "state"), grpcAddress: filepath.Join(tmp, "containerd.sock")}
	cleanupDirs(t, e.socketDir)
	ids := []string{"legacy-plain", "legacy-options", "legacy-bad", "bootstrap"}
	// Registered after the binary's directory, so run before its removal.
	t.Cleanup(func() { killShims(t, e.bin, e.socketDir, e.grpcAddress, ids) })
	e.plainAddress = regexp.MustCompile(`^unix://` + regexp.QuoteMeta(e.socketDir) + `/[0-9a-f]{64}$`)

	for _, tc := range []struct {
		name string
		run  func(*testing.T, *starts)
	}{
		{"containerd 1.7 without options", startLegacyPlain},
		{"containerd 1.7 with runtime options", startLegacyOptions},
		{"containerd 1.7 with bad runtime options", startLegacyBadOptions},
		{"containerd 2.3 bootstrap", startBootstrap},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, e) })
	}
}

// starts is what TestStartProtocols's shims share: the shim binary, where
// they put their sockets and bundles, and the fake containerd's address.
type starts struct {
	bin, socketDir, state, grpcAddress string
	// plainAddress matches the bare address a legacy start writes.
	plainAddress *regexp.Regexp
}

// legacyStart runs `start` as containerd 1.7's runtime/v2/shim.Command and
// binary.Start do.
func (e *starts) legacyStart(t *testing.T, id string, stdin []byte) ([]byte, error) {
	cmd := exec.Command(e.bin, "-namespace", testNamespace, "-address", e.grpcAddress, "-publish-binary", "/usr/bin/containerd", "-id", id, "-debug", "start")
	cmd.Dir = newBundle(t, e.state, id)
	cmd.Env = append(os.Environ(),
		"GOMAXPROCS=2",
		"TTRPC_ADDRESS="+e.grpcAddress+".ttrpc",
		"GRPC_ADDRESS="+e.grpcAddress,
		"NAMESPACE="+testNamespace,
	)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	return cmd.CombinedOutput()
}

func startLegacyPlain(t *testing.T, e *starts) {
	out, err := e.legacyStart(t, "legacy-plain", nil)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if !e.plainAddress.Match(out) {
		t.Fatalf("start wrote %q; want a bare unix:// address", out)
	}
	pid := connectV2(t, string(out), e.bin)
	if got := shimEnv(t, pid, options.Env); got != "" {
		t.Errorf("shim's %s = %q; want empty", options.Env, got)
	}
}

func startLegacyOptions(t *testing.T, e *starts) {
	body := "host_build = \"10.0.17763\"\n"
	out, err := e.legacyStart(t, "legacy-options", marshalOptions(t, body))
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if !e.plainAddress.Match(out) {
		t.Fatalf("start wrote %q; want a bare unix:// address", out)
	}
	pid := connectV2(t, string(out), e.bin)
	if got := shimEnv(t, pid, options.Env); got != body {
		t.Errorf("shim's %s = %q; want %q", options.Env, got, body)
	}
}

func startLegacyBadOptions(t *testing.T, e *starts) {
	out, err := e.legacyStart(t, "legacy-bad", marshalOptions(t, "no_such_option = 1\n"))
	if err == nil {
		t.Fatalf("start succeeded with %q; want the options refused", out)
	}
	if !strings.Contains(string(out), "decode winproc runtime options") {
		t.Errorf("start failed with %q; want the options' error", out)
	}
}

// startBootstrap starts the shim as containerd 2.3+ does, with
// BootstrapParams on stdin, and connects over task API v3.
func startBootstrap(t *testing.T, e *starts) {
	const id = "bootstrap"
	params, err := proto.Marshal(&bootapi.BootstrapParams{
		InstanceID:             id,
		Namespace:              testNamespace,
		ContainerdGrpcAddress:  e.grpcAddress,
		ContainerdTtrpcAddress: e.grpcAddress + ".ttrpc",
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, "-namespace", testNamespace, "-address", e.grpcAddress, "-id", id, "start")
	cmd.Dir = newBundle(t, e.state, id)
	cmd.Env = append(os.Environ(), "TTRPC_ADDRESS="+e.grpcAddress+".ttrpc")
	cmd.Stdin = bytes.NewReader(params)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("start: %v\n%s", err, stderr.Bytes())
	}
	var result bootapi.BootstrapResult
	if err := proto.Unmarshal(out, &result); err != nil {
		t.Fatalf("start wrote %q, not a BootstrapResult: %v", out, err)
	}
	if result.GetVersion() != 3 || result.GetProtocol() != "ttrpc" || !e.plainAddress.MatchString(result.GetAddress()) {
		t.Fatalf("start = %v; want version 3 over ttrpc at a unix:// address", &result)
	}
	client := dial(t, result.GetAddress())
	resp, err := taskv3.NewTTRPCTaskClient(client).Connect(callContext(t), &taskv3.ConnectRequest{ID: id})
	if err != nil {
		t.Fatalf("task v3 Connect: %v", err)
	}
	checkShim(t, int(resp.GetShimPid()), e.bin)
}

// buildShim builds the shim binary into dir.
func buildShim(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "containerd-shim-winproc-v2")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// `-info` answers containerd's runtime introspection with a RuntimeInfo.
func TestInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the shim binary")
	}
	bin := buildShim(t, t.TempDir())
	out, err := exec.Command(bin, "-info").Output()
	if err != nil {
		t.Fatalf("-info: %v", err)
	}
	var info apitypes.RuntimeInfo
	if err := proto.Unmarshal(out, &info); err != nil {
		t.Fatalf("-info printed no RuntimeInfo: %v", err)
	}
	if info.GetName() != "io.containerd.winproc.v2" || info.GetVersion().GetVersion() == "" {
		t.Errorf("-info = %v", &info)
	}
}

// connectV2 asks the shim at address for task API v2's Connect, as
// containerd 1.7 does, and returns the shim's pid.
func connectV2(t *testing.T, address, bin string) int {
	t.Helper()
	client := dial(t, address)
	resp, err := taskv2.NewTTRPCTaskClient(client).Connect(callContext(t), &taskv2.ConnectRequest{ID: "no-such-task"})
	if err != nil {
		t.Fatalf("task v2 Connect: %v", err)
	}
	pid := int(resp.GetShimPid())
	checkShim(t, pid, bin)
	return pid
}

func dial(t *testing.T, address string) *ttrpc.Client {
	t.Helper()
	conn, err := net.DialTimeout("unix", strings.TrimPrefix(address, "unix://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	client := ttrpc.NewClient(conn)
	t.Cleanup(func() { client.Close() })
	return client
}

func callContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), testNamespace), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkShim verifies that pid is a shim of the test's binary.
func checkShim(t *testing.T, pid int, bin string) {
	t.Helper()
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || exe != bin {
		t.Fatalf("shim pid %d runs %q (%v); want %s", pid, exe, err, bin)
	}
}

// shimEnv returns the environment variable key of process pid.
func shimEnv(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for kv := range strings.SplitSeq(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	t.Fatalf("shim pid %d has no %s", pid, key)
	return ""
}

// newBundle makes the bundle of task id where containerd would,
// <state>/io.containerd.runtime.v2.task/<namespace>/<id> (so the emulation's
// root is in the test's directory), with the spec's annotations and the log
// FIFO containerd reads the shim's log from.
func newBundle(t *testing.T, state, id string) string {
	t.Helper()
	bundle := filepath.Join(state, "io.containerd.runtime.v2.task", testNamespace, id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(map[string]any{"annotations": map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(bundle, "log")
	if err := syscall.Mkfifo(fifo, 0o700); err != nil {
		t.Fatal(err)
	}
	// Read-write: the shim's open never blocks, and reads never see an end.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		logs bytes.Buffer
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			mu.Lock()
			logs.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		f.Close()
		<-done
		if t.Failed() {
			mu.Lock()
			t.Logf("shim log of %s:\n%s", id, logs.Bytes())
			mu.Unlock()
		}
	})
	return bundle
}

// killShims kills, by pid, the shims running the test's binary, and removes
// the sockets of tasks ids (a killed shim leaves its socket).
func killShims(t *testing.T, bin, socketDir, grpcAddress string, ids []string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Error(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err != nil || (exe != bin && exe != bin+" (deleted)") {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Errorf("kill shim %d: %v", pid, err)
		}
	}
	ctx := namespaces.WithNamespace(context.Background(), testNamespace)
	for _, id := range ids {
		address, err := shim.CreateSocketAddress(ctx, socketDir, grpcAddress, id, false)
		if err != nil {
			t.Error(err)
			continue
		}
		if err := shim.RemoveSocket(address); err != nil && !os.IsNotExist(err) {
			t.Error(err)
		}
	}
}

// cleanupDirs removes at the end the directories of dir the test made.
func cleanupDirs(t *testing.T, dir string) {
	var made []string
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			made = append(made, d)
		}
	}
	t.Cleanup(func() {
		for _, d := range made {
			os.Remove(d) // only if empty
		}
	})
}
