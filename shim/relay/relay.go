// Package relay copies a process's standard streams between the pipes a
// compute backend holds for it and the caller's streams (the shim's
// containerd fifos): HCS's pipes in the HCS backend, the anonymous pipes
// the HostProcess backend gives its processes.
package relay

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/containerd/log"
)

// Relay copies a process's standard streams between the pipes the backend
// holds for it and the caller's streams, in goroutines it owns:
//
//   - stdin: caller's Stdin → the process's stdin pipe; at EOF or on a
//     failure, the process's stdin is closed (the backend's own close,
//     such as HCS's CloseStdin, then the pipe), so the process reads EOF;
//   - stdout, stderr: the process's pipes → the caller's Stdout, Stderr,
//     each until EOF (the pipe's last writer closed it) or until the pipe
//     is closed under it.
//
// A copy blocked writing to the caller's stream cannot be interrupted from
// here; the caller unblocks it by closing or draining its stream.
type Relay struct {
	in          io.WriteCloser // the process's stdin; nil when not connected
	out, errOut io.ReadCloser  // the process's stdout and stderr; nil when not connected
	closeFirst  func() error   // the backend's close of stdin; nil for none
	log         *log.Entry

	stdinOnce  sync.Once
	stdinErr   error
	outputOnce sync.Once
	outputDone chan struct{} // closed when both output copies have ended
}

// Start starts the copies. in, out and errOut are the process's pipes,
// which the relay owns from now on; src is the caller's stdin and dst,
// dstErr its stdout and stderr. A stream whose pipe or caller's end is nil
// is not copied. closeStdin, when not nil, is the backend's own way of
// ending the process's input, called before the stdin pipe is closed.
func Start(in io.WriteCloser, out, errOut io.ReadCloser, src io.Reader, dst, dstErr io.Writer, closeStdin func() error, logger *log.Entry) *Relay {
	r := &Relay{
		in:         in,
		out:        out,
		errOut:     errOut,
		closeFirst: closeStdin,
		log:        logger,
		outputDone: make(chan struct{}),
	}
	if in != nil && src != nil {
		go func() {
			_, err := io.Copy(in, src)
			if err != nil && !errors.Is(err, io.ErrClosedPipe) {
				r.log.WithError(err).Debug("stdin copy ended")
			}
			if err := r.CloseStdin(); err != nil {
				r.log.WithError(err).Debug("close stdin after its copy")
			}
		}()
	} else if in != nil {
		// Nothing will ever be written: let the process read EOF.
		if err := r.CloseStdin(); err != nil {
			r.log.WithError(err).Debug("close unconnected stdin")
		}
	}
	var wg sync.WaitGroup
	for _, c := range []struct {
		name string
		from io.ReadCloser
		to   io.Writer
	}{{"stdout", out, dst}, {"stderr", errOut, dstErr}} {
		if c.from == nil || c.to == nil {
			// A pipe is requested only for a connected stream.
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := io.Copy(c.to, c.from)
			r.log.WithError(err).WithField("bytes", n).Debugf("%s copy ended", c.name)
		}()
	}
	go func() {
		wg.Wait()
		r.CloseOutput()
		close(r.outputDone)
	}()
	return r
}

// CloseStdin closes the process's stdin once: the backend's own close
// (HCS's CloseStdin), then the backend's end of the pipe, so the process
// reads EOF. Input not yet written is dropped. It returns the first
// attempt's error.
func (r *Relay) CloseStdin() error {
	r.stdinOnce.Do(func() {
		if r.in == nil {
			return
		}
		var errs []error
		if r.closeFirst != nil {
			errs = append(errs, r.closeFirst())
		}
		errs = append(errs, r.in.Close())
		r.stdinErr = errors.Join(errs...)
	})
	return r.stdinErr
}

// CloseStdinPipe closes the backend's end of stdin without the backend's
// own close: for a process that has exited.
func (r *Relay) CloseStdinPipe() {
	r.stdinOnce.Do(func() {
		if r.in != nil {
			r.in.Close()
		}
	})
}

// CloseOutput closes the output pipes, ending their copies.
func (r *Relay) CloseOutput() {
	r.outputOnce.Do(func() {
		if r.out != nil {
			r.out.Close()
		}
		if r.errOut != nil {
			r.errOut.Close()
		}
	})
}

// OutputDone is closed when both output copies have ended.
func (r *Relay) OutputDone() <-chan struct{} { return r.outputDone }

// Drain waits, after the process's exit, for its output copies to end,
// for at most timeout; then it closes the output pipes: a process the
// exited one started may hold them open for ever.
func (r *Relay) Drain(timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.outputDone:
	case <-t.C:
		r.log.WithField("timeout", timeout).
			Warn("process output still open after its exit (held by a process it started?); no longer copied")
		r.CloseOutput()
	}
}

// HasStdin reports whether the process's stdin is connected.
func (r *Relay) HasStdin() bool { return r.in != nil }
