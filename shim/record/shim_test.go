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
