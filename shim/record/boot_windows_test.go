package record

import "testing"

// BootedSince tells a shim of an earlier boot (started before the boot
// time) from one of this boot (this process), and a shim of unknown start
// from both.
func TestBootedSince(t *testing.T) {
	self := Self()
	if self.Start == 0 {
		t.Fatal("no start time of this process")
	}
	for _, tc := range []struct {
		name string
		shim Shim
		want bool
	}{
		{"this boot", self, false},
		{"an earlier boot", Shim{PID: self.PID, Start: 1}, true},
		{"unknown start", Shim{PID: self.PID}, false},
	} {
		if got := BootedSince(tc.shim); got != tc.want {
			t.Errorf("%s: BootedSince(%+v) = %v, want %v", tc.name, tc.shim, got, tc.want)
		}
	}
}
