//go:build linux

package demo

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/winproc/winproc/internal/procscan"
)

// daemon is a long-running process the demo started (containerd, the
// snapshotter), in a process group of its own so that a Ctrl-C in the
// terminal reaches the demo, which then stops it in order.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	stopped bool
}

func startDaemon(name, logPath string, env []string, argv ...string) (*daemon, error) {
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	d := &daemon{name: name, logPath: logPath, exited: make(chan struct{})}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = env
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		d.cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

// alive reports whether the daemon still runs.
func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// stop ends the daemon as a service manager would: SIGTERM to its process
// group, SIGKILL after 10 s. Stopping twice is harmless.
func (d *daemon) stop() error {
	if d == nil || d.stopped {
		return nil
	}
	d.stopped = true
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
		return nil
	case <-time.After(10 * time.Second):
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
		return fmt.Errorf("%s did not stop within 10 s of SIGTERM; killed it", d.name)
	}
}

// logTail returns the last lines of the daemon's log, for failure reports.
func (d *daemon) logTail(lines int) string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return ""
	}
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// waitSocket waits until something accepts connections on the unix socket
// path, or d exits.
func waitSocket(d *daemon, path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil
		}
		if !d.alive() {
			return fmt.Errorf("%s exited before listening on %s:\n%s", d.name, path, d.logTail(20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not listen on %s after %v:\n%s", d.name, path, limit, d.logTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mountsBelow lists the mount points at or below dir, deepest first (the
// order to unmount them in).
func mountsBelow(dir string) []string {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil
	}
	found := make([]string, len(infos))
	for i, m := range infos {
		found[i] = m.Mountpoint
	}
	sort.Slice(found, func(i, j int) bool { return len(found[i]) > len(found[j]) })
	return found
}

// processesOf lists the live processes that belong to the demo in dir: the
// shims serving its containerd (their command line names its socket) and
// the Wine processes of its compute systems (their WINEPREFIX lies in dir).
func processesOf(dir, containerdAddress string) []string {
	var found []string
	for _, pid := range procscan.Live(func(_ int, cmdline, environ []byte) bool {
		shim := bytes.Contains(cmdline, []byte("containerd-shim-winproc-v2")) && bytes.Contains(cmdline, []byte(containerdAddress))
		return shim || bytes.Contains(environ, []byte("WINEPREFIX="+dir+"/"))
	}) {
		found = append(found, strconv.Itoa(pid)+" "+procscan.Comm(pid))
	}
	return found
}

// pidOf returns the PID of an entry of processesOf.
func pidOf(entry string) int {
	pid, _ := strconv.Atoi(strings.Fields(entry)[0])
	return pid
}
