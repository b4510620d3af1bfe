//go:build linux

package emulation

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/winproc/winproc/shim/compute"
)

// Default console size of a Terminal process given none.
const (
	defaultConsoleWidth  = 80
	defaultConsoleHeight = 25
)

// connectStdio gives the process's command its standard streams: with
// Terminal a pseudo terminal, else a pipe for each stream ps has. It returns
// the child's ends, for the caller to close once the child has them (on
// error, those opened so far).
func (p *process) connectStdio(ps *compute.ProcessSettings) ([]*os.File, error) {
	if ps.Terminal {
		return p.connectPty(ps)
	}
	// Its own process group: a terminal's Ctrl-C for the shim does not
	// reach the container.
	cmd := p.cmd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var childEnds []*os.File
	if ps.Stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return childEnds, err
		}
		cmd.Stdin, p.stdin = r, w
		childEnds = append(childEnds, r)
	}
	pipeTo := func(set func(*os.File)) error {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		set(w)
		childEnds = append(childEnds, w)
		p.outputs = append(p.outputs, r)
		return nil
	}
	same := ps.Stdout != nil && sameWriter(ps.Stdout, ps.Stderr)
	if ps.Stdout != nil {
		if err := pipeTo(func(w *os.File) {
			cmd.Stdout = w
			if same {
				cmd.Stderr = w
			}
		}); err != nil {
			return childEnds, err
		}
	}
	if ps.Stderr != nil && !same {
		if err := pipeTo(func(w *os.File) { cmd.Stderr = w }); err != nil {
			return childEnds, err
		}
	}
	return childEnds, nil
}

// connectPty gives a Terminal process a pseudo terminal of its console
// size (default 80x25) as its controlling terminal and its three streams.
func (p *process) connectPty(ps *compute.ProcessSettings) ([]*os.File, error) {
	master, slave, err := openPty()
	if err != nil {
		return nil, fmt.Errorf("emulation: %w", err)
	}
	p.pty = master
	w, h := ps.ConsoleWidth, ps.ConsoleHeight
	if w == 0 || h == 0 {
		w, h = defaultConsoleWidth, defaultConsoleHeight
	}
	if err := resizePty(master, w, h); err != nil {
		return []*os.File{slave}, fmt.Errorf("emulation: console size: %w", err)
	}
	cmd := p.cmd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	p.outputs = append(p.outputs, master)
	return []*os.File{slave}, nil
}

// startCopiers starts the goroutines a started process owns: the copiers
// of its output and its stdin, and its waiter.
func (p *process) startCopiers(ps *compute.ProcessSettings) {
	// Each output copier ends at EOF of its stream, or when Wait's drain
	// timeout or Close closes its read end.
	if ps.Terminal {
		p.copy(ps.Stdout, p.pty)
	} else {
		outs := p.outputs
		if ps.Stdout != nil {
			p.copy(ps.Stdout, outs[0])
			outs = outs[1:]
		}
		if len(outs) > 0 {
			p.copy(ps.Stderr, outs[0])
		}
	}
	if ps.Stdin != nil {
		// The stdin copier ends when Stdin reaches EOF or fails, or at the
		// first write after the process's stdin was closed (its end,
		// Close, or the process's exit). A Stdin that never returns from
		// Read keeps it until the caller closes Stdin.
		go p.copyStdin(ps.Stdin)
	}
	// The waiter ends when the process does.
	go p.wait()
}

// sameWriter reports whether a and b are the same writer (os/exec's rule:
// then one pipe carries both streams, and one goroutine writes).
func sameWriter(a, b io.Writer) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// copy copies r to w in a copier goroutine. When w fails, the rest of r is
// drained so the process never blocks on a full pipe. Reading a pseudo
// terminal's master fails with EIO once no process holds the slave: that
// is its EOF.
func (p *process) copy(w io.Writer, r *os.File) {
	if w == nil {
		w = io.Discard
	}
	p.copiers.Add(1)
	go func() {
		defer p.copiers.Done()
		buf := make([]byte, 32*1024)
		for {
			n, err := r.Read(buf)
			if n > 0 && w != io.Discard {
				if _, werr := w.Write(buf[:n]); werr != nil {
					w = io.Discard
				}
			}
			if err != nil {
				return
			}
		}
	}()
}

func (p *process) copyStdin(src io.Reader) {
	defer p.endStdin()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case <-p.stdinClosed:
				return
			default:
			}
			var werr error
			if p.terminal {
				_, werr = p.pty.Write(buf[:n])
			} else {
				_, werr = p.stdin.Write(buf[:n])
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// endStdin ends the process's input: for a pipe, closeStdin; a console
// has no end of input of its own, so a Terminal process is sent what a
// console user types to end it, once, and then the forwarding stops.
func (p *process) endStdin() {
	p.stdinOnce.Do(func() {
		if p.terminal {
			// A process that is gone has closed the pty under us: the
			// failed write is harmless.
			p.pty.Write([]byte(consoleEOF))
		}
		p.shutStdin()
	})
}

// closeStdin closes the process's stdin without ending a console's input:
// the pipe's write end, so the process reads EOF; for Terminal only the
// forwarding stops.
func (p *process) closeStdin() {
	p.stdinOnce.Do(p.shutStdin)
}

func (p *process) shutStdin() {
	close(p.stdinClosed)
	if p.stdin != nil {
		p.stdin.Close()
	}
}
