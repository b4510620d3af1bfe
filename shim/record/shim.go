package record

import (
	"fmt"
	"os"
)

// Shim names the shim that serves a system: its pid, and when the process
// started, so that a later process given the same pid is not taken for
// it. A backend records it with each system it creates; a system whose
// shim is gone is what containerd's delete, or a sweep of orphans,
// cleans up.
type Shim struct {
	PID int `json:"pid,omitempty"`
	// Start is the process's start: clock ticks after boot on Linux
	// (/proc/<pid>/stat), its creation time in 100 ns units on Windows
	// (GetProcessTimes).
	Start uint64 `json:"start,omitempty"`
}

// Self is the running process as a Shim; a zero Shim when its start
// cannot be read.
func Self() Shim {
	start, ok := processStart(os.Getpid())
	if !ok {
		return Shim{}
	}
	return Shim{PID: os.Getpid(), Start: start}
}

// Alive reports whether the shim s still runs: a process of its pid that
// started when it did. A zero Shim is not alive.
func Alive(s Shim) bool {
	if s.PID <= 0 {
		return false
	}
	start, ok := processStart(s.PID)
	return ok && start == s.Start
}

// Orphaned is the rule of orphans: a system is one when its shim is not
// alive and containerd, asked, has no task of its id; when containerd did
// not answer, a dead shim is enough (containerd would only run the shim's
// delete, which does what a sweep does).
func Orphaned(shimAlive, answered, hasTask bool) bool {
	return !shimAlive && (!answered || !hasTask)
}

// Why says why the system id, whose record names shim (a zero Shim when
// it names none), is an orphan; "" when it is not (Orphaned). answered
// is whether containerd answered, hasTask whether it has a task of id. A
// system that names no shim may be one being created: only containerd
// can say it is unknown.
func Why(id string, shim Shim, answered, hasTask bool) string {
	switch {
	case shim.PID == 0 && answered && !hasTask:
		return "it records no shim and containerd has no task " + id
	case shim.PID == 0 || !Orphaned(Alive(shim), answered, hasTask):
		return ""
	case !answered:
		return fmt.Sprintf("its shim (pid %d) is gone; containerd did not answer", shim.PID)
	}
	return fmt.Sprintf("its shim (pid %d) is gone and containerd has no task %s", shim.PID, id)
}
