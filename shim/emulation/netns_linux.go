//go:build linux

package emulation

import (
	"maps"
	"os/exec"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
)

// A Windows pod's compute systems share the network of its HNS namespace.
// On Linux, containerd's CRI gives a pod a network namespace (a bind-mounted
// file, set up by CNI) and sends its path where Windows sends the HNS
// namespace's GUID. The emulation starts every process of such a silo, its
// wineserver included (Wine's sockets are made by the server), inside that
// namespace, so the pod's pause and containers share localhost and the pod's
// address, as on Windows.

// isNetNSPath tells a Linux network namespace path from an HNS namespace
// GUID.
func isNetNSPath(namespace string) bool { return strings.HasPrefix(namespace, "/") }

// startProcess starts cmd as a process of the silo: in its cgroups and its
// network namespace. Wine's own processes (the wineserver, wineboot and the
// system processes it starts) stay out of the memory cgroup, which bounds
// the container's processes (limits_linux.go).
func (s *system) startProcess(cmd *exec.Cmd, wineOwn bool) error {
	limits := s.st.LimitCgroups
	if wineOwn && limits["memory"] != "" {
		limits = maps.Clone(limits)
		delete(limits, "memory")
	}
	start := func() error {
		return inLimitCgroups(limits, func() error { return startIn(s.st.Cgroup, cmd, s.b.reaper.start) })
	}
	if s.st.NetNS == "" {
		return start()
	}
	// The process is forked from a thread locked inside the namespace, so
	// it is born there; the shim's other threads stay where they are.
	return ns.WithNetNSPath(s.st.NetNS, func(ns.NetNS) error { return start() })
}
