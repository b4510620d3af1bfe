//go:build linux

package emulation

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// startMonitor starts the goroutine that watches the system until it has
// stopped; s.mu is held. exited is the owned wineserver's exit, nil for an
// opened system and a HostProcess container (watchHostProcess).
func (s *system) startMonitor(exited <-chan struct{}) {
	s.monitorDone = make(chan struct{})
	if s.st.HostProcess != nil {
		go s.watchHostProcess()
		return
	}
	go s.monitor(exited)
}

// monitor is the system's watcher, owned by the system: it ends when the
// system has stopped (it closes Wait) or at Close. While the system runs
// with its own wineserver it sleeps until the server exits or a stop is
// asked; otherwise it scans the silo every monitorInterval.
func (s *system) monitor(exited <-chan struct{}) {
	defer close(s.monitorDone)
	owned := exited != nil
	serverGone := false
	var termAt time.Time
	for {
		s.mu.Lock()
		stopping := s.stopAsked
		s.mu.Unlock()
		var tick <-chan time.Time
		if stopping || !owned || serverGone {
			tick = time.After(monitorInterval)
		}
		select {
		case <-s.monitorStop:
			return
		case <-s.wake:
		case <-exited:
			serverGone, exited = true, nil
		case <-tick:
		}
		if s.check(owned, serverGone, &termAt) {
			return
		}
	}
}

// processes returns the silo's running processes, the wineserver
// included. A HostProcess container's are its cgroup's alone: the host
// prefix's processes are every container's (and without its cgroup it has
// none left).
func (s *system) processes() ([]procStat, error) {
	if s.st.HostProcess != nil && s.st.Cgroup == "" {
		return nil, nil
	}
	return siloMembers(s.st.Cgroup, s.prefix)
}

// isServer reports whether p is the system's wineserver.
func (s *system) isServer(p procStat) bool {
	if s.st.ServerPID != 0 {
		return p.pid == s.st.ServerPID && (s.st.ServerStart == 0 || p.start == s.st.ServerStart)
	}
	return strings.HasPrefix(p.comm, "wineserver")
}

// check scans the silo once and acts: it reports whether the system has
// stopped.
func (s *system) check(owned, serverGone bool, termAt *time.Time) bool {
	procs, err := s.processes()
	if err != nil {
		return false
	}
	s.mu.Lock()
	terminate, stopAsked := s.terminate, s.stopAsked
	var server *procStat
	var others []procStat
	for _, p := range procs {
		if s.isServer(p) {
			server = &p
		} else {
			others = append(others, p)
		}
	}
	s.mu.Unlock()
	alive := server != nil
	if owned {
		alive = !serverGone
	}

	switch {
	case !alive:
		// Without their server Wine processes die; make sure.
		for _, p := range others {
			signalProc(p, unix.SIGKILL)
		}
		if len(others) == 0 {
			s.finish(s.lostError())
			return true
		}
	case terminate:
		if server != nil {
			signalProc(*server, unix.SIGKILL)
		}
		for _, p := range others {
			signalProc(p, unix.SIGKILL)
		}
	case stopAsked:
		for _, p := range others {
			if !isWineSystemProcess(p.pid) {
				return false // still shutting down
			}
		}
		// Only Wine's own processes are left: stop the server, which
		// ends them. SIGTERM lets it save the registry; it is killed if
		// it takes too long.
		if server != nil {
			if termAt.IsZero() {
				signalProc(*server, unix.SIGTERM)
				*termAt = time.Now()
			} else if time.Since(*termAt) > shutdownServerGrace {
				signalProc(*server, unix.SIGKILL)
			}
		}
	}
	return false
}

// lostError is the ExitError of a system that stopped without being asked;
// for an owned server it is called once the server has exited.
func (s *system) lostError() error {
	if s.opened {
		return fmt.Errorf("emulation: system %s: its processes ended", s.id)
	}
	s.mu.Lock()
	out := s.serverOutput
	s.mu.Unlock()
	return fmt.Errorf("emulation: system %s: the wineserver exited unexpectedly (%v)%s", s.id, s.serverErr, out.suffix())
}
