//go:build linux

package emulatednode

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/syncbuffer"
)

func TestLayoutAndCommandLines(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cfg          Config
		wantSnapRoot string
		wantSnapTail []string
		wantCtrd     string
		wantCtrdTail []string
	}{
		{"defaults", Config{Dir: "/n", Tools: "/t", Bin: "/b", HostBuild: "10.0.20348"},
			"/n/snapshotter", []string{"-host-build", "10.0.20348"}, "/t/containerd-wincri", []string{"-c", "/n/config.toml"}},
		{"log level, root, stock containerd", Config{Dir: "/n", Tools: "/t", Bin: "/b", HostBuild: "10.0.20348", LogLevel: "warn", SnapshotterRoot: "/disk", Containerd: StockContainerd},
			"/disk", []string{"-host-build", "10.0.20348", "-log-level", "warn"}, "/t/containerd", []string{"-c", "/n/config.toml", "-l", "warn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New(tc.cfg)
			if n.Address != "/n/containerd.sock" || n.SnapshotterAddress != "/n/snapshotter.sock" || n.SnapshotterRoot != tc.wantSnapRoot {
				t.Errorf("layout %+v", n)
			}
			snap := n.SnapshotterArgv()
			if snap[0] != "/b/winproc-snapshotter" || !reflect.DeepEqual(snap[len(snap)-len(tc.wantSnapTail):], tc.wantSnapTail) ||
				!strings.Contains(strings.Join(snap, " "), "-root "+tc.wantSnapRoot+" -address /n/snapshotter.sock -containerd-address /n/containerd.sock") {
				t.Errorf("snapshotter argv %q", snap)
			}
			if ctrd := n.ContainerdArgv(); ctrd[0] != tc.wantCtrd || !reflect.DeepEqual(ctrd[1:], tc.wantCtrdTail) {
				t.Errorf("containerd argv %q", ctrd)
			}
			if got := n.Bundle("c1"); got != "/n/state/io.containerd.runtime.v2.task/k8s.io/c1" {
				t.Errorf("bundle %s", got)
			}
		})
	}
}

// A daemon gets Bin first on its PATH (containerd finds the shim there),
// writes to the given output, and stops on SIGTERM.
func TestDaemon(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	n := New(Config{Dir: dir, Bin: bin, Env: []string{"PATH=/usr/bin:/bin"}})
	out := &syncbuffer.Buffer{}
	d, err := n.Start("sh", out, []string{"/bin/sh", "-c", `echo "$PATH"; exec sleep 60`})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "\n") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := strings.TrimSpace(out.String()); got != bin+":/usr/bin:/bin" {
		t.Errorf("PATH %q, want Bin first", got)
	}
	if !d.Alive() {
		t.Fatal("the daemon is not alive")
	}
	if err := d.Stop(5 * time.Second); err != nil || d.Alive() {
		t.Errorf("Stop: %v, alive %v", err, d.Alive())
	}
	if err := d.Stop(5 * time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
