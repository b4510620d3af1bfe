package main

import "testing"

// The shim holds on through the events of a closing console, a logoff and
// the host's shutdown, and ends on CTRL_C and CTRL_BREAK as before.
func TestHoldsOn(t *testing.T) {
	for _, tc := range []struct {
		event uint32
		hold  bool
	}{
		{ctrlCEvent, false},
		{ctrlBreakEvent, false},
		{ctrlCloseEvent, true},
		{ctrlLogoffEvent, true},
		{ctrlShutdownEvent, true},
		{3, false}, // reserved
		{7, false},
	} {
		if got := holdsOn(tc.event); got != tc.hold {
			t.Errorf("holdsOn(%s %d) = %v, want %v", eventName(tc.event), tc.event, got, tc.hold)
		}
	}
}
