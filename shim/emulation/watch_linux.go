//go:build linux

package emulation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Watches that wake a HostProcess container's watcher when something
// happens, rather than polling: the runtime's poller waits on their
// descriptors, and closing one ends its reader goroutine.

// cgroupEvents wakes its reader each time a cgroup's cgroup.events file
// changes, that is when the cgroup's populated state does (a first process
// joined, or the last left): an inotify watch, so that a running cgroup
// costs no polling.
type cgroupEvents struct {
	f *os.File
	// C receives a value after changes (several may come as one).
	C chan struct{}
}

// watchCgroupEvents watches the cgroup at path until close.
func watchCgroupEvents(path string) (*cgroupEvents, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	events := filepath.Join(path, "cgroup.events")
	if _, err := unix.InotifyAddWatch(fd, events, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", events, err)
	}
	// Non-blocking, so the runtime's poller waits for it and close ends
	// a read.
	w := &cgroupEvents{f: os.NewFile(uintptr(fd), "inotify:"+events), C: make(chan struct{}, 1)}
	// The reader, owned by the watch: it ends at close.
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := w.f.Read(buf); err != nil {
				return
			}
			select {
			case w.C <- struct{}{}:
			default:
			}
		}
	}()
	return w, nil
}

func (w *cgroupEvents) close() { w.f.Close() }

// exitWatch closes C when a process exits: a pidfd, which works for a
// process that is not this one's child (the host prefix's wineserver may
// be another shim's).
type exitWatch struct {
	f *os.File // nil for a process gone before the watch
	C chan struct{}
}

// watchExit watches the process of pid and start time start (clock ticks
// after boot) until close; C is closed at once when it has gone already.
func watchExit(pid int, start uint64) (*exitWatch, error) {
	w := &exitWatch{C: make(chan struct{})}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) || err == nil && !processAlive(pid, start) {
		if err == nil {
			unix.Close(fd)
		}
		close(w.C)
		return w, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd of process %d: %w", pid, err)
	}
	w.f = os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
	rc, err := w.f.SyscallConn()
	if err != nil {
		w.f.Close()
		return nil, err
	}
	// The reader, owned by the watch: it ends at the exit or at close. A
	// pidfd turns readable when its process exits.
	go func() {
		err := rc.Read(func(fd uintptr) bool {
			n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0
		})
		if err == nil {
			close(w.C)
		}
	}()
	return w, nil
}

func (w *exitWatch) close() {
	if w.f != nil {
		w.f.Close()
	}
}
