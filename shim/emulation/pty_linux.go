//go:build linux

package emulation

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openPty allocates a pseudo terminal: the master, which the backend reads
// and writes, and the slave, the process's stdin, stdout and stderr. It is
// done here with ioctls rather than with containerd/console, whose Resize
// calls (*os.File).Fd and so puts the master in blocking mode, after which
// closing it would no longer interrupt the goroutine reading it.
func openPty() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	var n int
	var ierr error
	rc, err := master.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) {
			if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr != nil {
				return
			}
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		})
	}
	if err == nil {
		err = ierr
	}
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open pty slave: %w", err)
	}
	if err := makeRaw(slave); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, fmt.Errorf("pty slave: %w", err)
	}
	return master, slave, nil
}

// makeRaw puts the terminal in raw mode before the process starts, as
// Wine's console puts it anyway: the kernel's line discipline must neither
// echo, translate nor act on the bytes typed in (Ctrl-Z would stop the
// process, Enter would arrive as a line feed), and input that arrives
// before Wine's console is up must wait, not be cooked.
func makeRaw(tty *os.File) error {
	rc, err := tty.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		var t *unix.Termios
		if t, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS); ierr != nil {
			return
		}
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB
		t.Cflag |= unix.CS8
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
		ierr = unix.IoctlSetTermios(int(fd), unix.TCSETS, t)
	}); err != nil {
		return err
	}
	return ierr
}

// resizePty sets the window size of the terminal of master.
func resizePty(master *os.File, width, height uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: height, Col: width})
	}); err != nil {
		return err
	}
	return ierr
}
