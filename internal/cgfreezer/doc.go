// Package cgfreezer freezes processes with the cgroup v1 freezer, for tests
// that need processes which ignore termination for a while: a process frozen
// there takes even SIGKILL only once it is thawed. (cgroup v2's
// cgroup.freeze lets SIGKILL through, so it cannot stand in.)
package cgfreezer
