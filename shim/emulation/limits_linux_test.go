//go:build linux

package emulation

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/winproc/winproc/shim/compute"
)

func TestFindV1Hierarchies(t *testing.T) {
	dir := t.TempDir()
	mountinfo := filepath.Join(dir, "mountinfo")
	cgroup := filepath.Join(dir, "cgroup")
	write := func(path string, lines ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(mountinfo,
		"30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw",
		"31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct",
		"32 25 0:28 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory",
		"33 25 0:29 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids",
		// A bind of a sub-cgroup is no hierarchy's root.
		"34 25 0:28 /sub /mnt/mem rw - cgroup cgroup rw,memory",
	)
	write(cgroup, "0::/", "5:pids:/", "4:memory:/pod/a", "3:cpu,cpuacct:/")
	got, err := findV1Hierarchies(mountinfo, cgroup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]v1Hierarchy{
		"memory": {mount: "/sys/fs/cgroup/memory", own: "/pod/a"},
		"cpu":    {mount: "/sys/fs/cgroup/cpu,cpuacct", own: "/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("found %+v, want %+v", got, want)
	}
}

// fakeCgroup makes a directory standing in for a cgroup v1 directory.
func fakeCgroup(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestApplyLimits(t *testing.T) {
	tests := []struct {
		name                  string
		r                     compute.Resources
		memory, quota, shares string
	}{
		{"none lifts every limit", compute.Resources{}, "-1", "-1", "1024"},
		{"memory", compute.Resources{MemoryLimitBytes: 256 << 20}, "268435456", "-1", "1024"},
		// A quarter of 4 processors: one processor's time per period.
		{"maximum", compute.Resources{CPUMaximum: 2500}, "-1", "100000", "1024"},
		{"count", compute.Resources{CPUCount: 2}, "-1", "200000", "1024"},
		{"weight", compute.Resources{CPUWeight: 50}, "-1", "-1", "512"},
		{"least weight", compute.Resources{CPUWeight: 1}, "-1", "-1", "10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := fakeCgroup(t, map[string]string{"memory.limit_in_bytes": "1"})
			cpu := fakeCgroup(t, map[string]string{"cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "1", "cpu.shares": "1"})
			if err := applyLimits(tt.r, map[string]string{"memory": mem, "cpu": cpu}, 4); err != nil {
				t.Fatal(err)
			}
			read := func(dir, name string) string {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			if got := read(mem, "memory.limit_in_bytes"); got != tt.memory {
				t.Errorf("memory limit %q, want %q", got, tt.memory)
			}
			if got := read(cpu, "cpu.cfs_quota_us"); got != tt.quota {
				t.Errorf("quota %q, want %q", got, tt.quota)
			}
			if got := read(cpu, "cpu.shares"); got != tt.shares {
				t.Errorf("shares %q, want %q", got, tt.shares)
			}
		})
	}
}

func TestUnenforced(t *testing.T) {
	both := map[string]v1Hierarchy{"memory": {}, "cpu": {}}
	tests := []struct {
		name string
		r    compute.Resources
		have map[string]v1Hierarchy
		want []string
	}{
		{"all enforced", compute.Resources{MemoryLimitBytes: 1, CPUMaximum: 1, CPUWeight: 1}, both, nil},
		{"no controllers", compute.Resources{MemoryLimitBytes: 1, CPUCount: 1}, nil, []string{"memory limit (no memory cgroup controller)", "CPU limits (no cpu cgroup controller)"}},
		{"affinity and storage", compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{}}, StorageIOPSMaximum: 1}, both, []string{"storage QoS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unenforced(tt.r, tt.have); !slices.Equal(got, tt.want) {
				t.Errorf("unenforced = %q, want %q", got, tt.want)
			}
		})
	}
}
