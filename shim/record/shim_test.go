package record

import (
	"os"
	"os/exec"
	"testing"
)

// A shim is alive while its process runs with its start time: not a zero
// Shim, not one whose process exited, not another process of its pid.
func TestAlive(t *testing.T) {
	self := Self()
	if self.PID != os.Getpid() || self.Start == 0 {
		t.Fatalf("Self = %+v", self)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		s    Shim
		want bool
	}{
		{"self", self, true},
		{"zero", Shim{}, false},
		{"another start of its pid", Shim{PID: self.PID, Start: self.Start + 1}, false},
		{"exited", Shim{PID: cmd.Process.Pid, Start: self.Start}, false},
	}
	for _, tc := range cases {
		if got := Alive(tc.s); got != tc.want {
			t.Errorf("%s: Alive(%+v) = %v", tc.name, tc.s, got)
		}
	}
}

func TestOrphaned(t *testing.T) {
	cases := []struct {
		alive, answered, hasTask, want bool
	}{
		{alive: true, answered: true, hasTask: false, want: false},
		{alive: true, answered: false, want: false},
		{alive: false, answered: true, hasTask: true, want: false},
		{alive: false, answered: true, hasTask: false, want: true},
		{alive: false, answered: false, want: true},
	}
	for _, tc := range cases {
		if got := Orphaned(tc.alive, tc.answered, tc.hasTask); got != tc.want {
			t.Errorf("Orphaned(alive %v, answered %v, task %v) = %v", tc.alive, tc.answered, tc.hasTask, got)
		}
	}
}

// Why names the shim and what containerd said; a system that names no
// shim is an orphan only when containerd answered without its task.
func TestWhy(t *testing.T) {
	gone := Shim{PID: 1 << 30, Start: 1}
	cases := []struct {
		name              string
		shim              Shim
		answered, hasTask bool
		want              string
	}{
		{"live shim", Self(), true, false, ""},
		{"gone, containerd has its task", gone, true, true, ""},
		{"gone, no task", gone, true, false, "its shim (pid 1073741824) is gone and containerd has no task c1"},
		{"gone, containerd silent", gone, false, false, "its shim (pid 1073741824) is gone; containerd did not answer"},
		{"no shim, no task", Shim{}, true, false, "it records no shim and containerd has no task c1"},
		{"no shim, containerd silent", Shim{}, false, false, ""},
		{"no shim, containerd has its task", Shim{}, true, true, ""},
	}
	for _, tc := range cases {
		if got := Why("c1", tc.shim, tc.answered, tc.hasTask); got != tc.want {
			t.Errorf("%s: Why = %q, want %q", tc.name, got, tc.want)
		}
	}
}
