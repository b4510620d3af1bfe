//go:build linux

package emulation

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestFindOrphans lays out systems of every kind of owner under a root
// (no mounts, no processes: only the records decide) and checks which
// FindOrphans lists, with containerd answering or not.
func TestFindOrphans(t *testing.T) {
	self, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dead := deadPID(t)
	root := t.TempDir()
	old := time.Now().Add(-2 * createGrace)
	system := func(id string, st *persisted, made time.Time) {
		dir := filepath.Join(root, id)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if st != nil {
			st.ID = id
			if err := saveState(dir, st); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, made, made); err != nil {
			t.Fatal(err)
		}
	}
	system("live", &persisted{ShimPID: os.Getpid(), ShimStart: self.start}, old)
	system("dead", &persisted{ShimPID: dead, ShimStart: 1}, old)
	system("dead-known", &persisted{ShimPID: dead, ShimStart: 1}, old)
	system("unrecorded", &persisted{}, old)
	system("halfmade", nil, old)
	system("young", nil, time.Now())
	// A HostProcess container whose shim died uses the host prefix.
	system("hpc-dead", &persisted{ShimPID: dead, ShimStart: 1, HostProcess: &hostProcessState{}}, old)
	if err := os.MkdirAll(filepath.Join(root, hostDirName, hostUsersDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, hostDirName, hostUsersDir, "hpc-dead"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	known := func(id string) bool { return id == "dead-known" || id == "live" }

	tests := []struct {
		name    string
		hasTask func(string) bool
		// liveHostUser adds a live HostProcess container to the host
		// prefix.
		liveHostUser bool
		want         []string
	}{
		{"containerd answers", known, false, []string{"dead", "halfmade", "hpc-dead", "unrecorded", HostPrefixID}},
		{"containerd does not answer", nil, false, []string{"dead", "dead-known", "hpc-dead", HostPrefixID}},
		{"the host prefix has a live user", known, true, []string{"dead", "halfmade", "hpc-dead", "unrecorded"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			users := filepath.Join(root, hostDirName, hostUsersDir)
			if tc.liveHostUser {
				os.WriteFile(filepath.Join(users, "live"), nil, 0o600)
				defer os.Remove(filepath.Join(users, "live"))
			}
			orphans, err := FindOrphans(root, tc.hasTask)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range orphans {
				got = append(got, o.ID)
				if o.Why == "" || o.Dir != filepath.Join(root, o.ID) {
					t.Errorf("orphan %+v: want a reason and its directory", o)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("orphans %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRemoveOrphan removes an orphan and refuses a system whose shim
// runs; removing one that is gone is no error.
func TestRemoveOrphan(t *testing.T) {
	self, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for id, st := range map[string]*persisted{
		"dead": {ID: "dead", ShimPID: deadPID(t), ShimStart: 1},
		"live": {ID: "live", ShimPID: os.Getpid(), ShimStart: self.start},
	} {
		dir := filepath.Join(root, id)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := saveState(dir, st); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for range 2 {
		if err := RemoveOrphan(ctx, root, Orphan{ID: "dead"}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "dead")); !os.IsNotExist(err) {
			t.Fatalf("the orphan's directory: %v, want it gone", err)
		}
	}
	err = RemoveOrphan(ctx, root, Orphan{ID: "live"})
	if err == nil || !strings.Contains(err.Error(), "not an orphan") {
		t.Errorf("removing a system a running shim serves: %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(root, "live", stateFile)); err != nil {
		t.Errorf("the served system's record: %v", err)
	}
	if err := RemoveOrphan(ctx, root, Orphan{ID: HostPrefixID}); err != nil {
		t.Errorf("removing a host prefix that is gone: %v", err)
	}
}
