//go:build linux

package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/winproc/winproc/integration/emulatednode"
)

// daemonStopGrace is how long a daemon has to stop after SIGTERM.
const daemonStopGrace = 10 * time.Second

// startDaemon shows and starts a daemon of the node with its output in the
// file logName of the demo directory, and waits until it listens on socket.
func (d *demo) startDaemon(name, logName string, argv []string, socket string) (*emulatednode.Daemon, error) {
	d.t.command(d.t.shellLine(argv) + " >" + logName + " 2>&1 &")
	log, err := os.OpenFile(filepath.Join(d.dir, logName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// The daemon has its own descriptor once started.
	defer log.Close()
	dm, err := d.node.Start(name, log, argv)
	if err != nil {
		return nil, err
	}
	if err := emulatednode.WaitSocket(socket, 30*time.Second, dm); err != nil {
		return dm, fmt.Errorf("%w:\n%s", err, d.logTail(logName, 20))
	}
	return dm, nil
}

// logTail returns the last lines of a daemon's log, for failure reports.
func (d *demo) logTail(logName string, lines int) string {
	b, err := os.ReadFile(filepath.Join(d.dir, logName))
	if err != nil {
		return ""
	}
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
