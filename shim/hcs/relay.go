package hcs

import (
	"errors"
	"io"
	"sync"

	"github.com/containerd/log"
)

// relay copies a process's standard streams between the pipes HCS created
// (which the backend owns after Process.Stdio) and the caller's streams,
// in goroutines it owns:
//
//   - stdin: caller's Stdin → the process's stdin pipe; at EOF or on a
//     failure, the process's stdin is closed (HCS's CloseStdin, then the
//     pipe), so the process reads EOF;
//   - stdout, stderr: the process's pipes → the caller's Stdout, Stderr,
//     each until EOF (the pipe's last writer in the container closed it)
//     or until the pipe is closed under it.
//
// A copy blocked writing to the caller's stream cannot be interrupted from
// here; the caller unblocks it by closing or draining its stream.
type relay struct {
	in            io.WriteCloser // the process's stdin; nil when not connected
	out, errOut   io.ReadCloser  // the process's stdout and stderr; nil when not connected
	closeStdinHCS func() error   // Process.CloseStdin
	log           *log.Entry

	stdinOnce  sync.Once
	stdinErr   error
	outputOnce sync.Once
	outputDone chan struct{} // closed when both output copies have ended
}

// startRelay starts the copies. src is the caller's stdin and dst, dstErr
// its stdout and stderr; a stream whose pipe or caller's end is nil is not
// copied.
func startRelay(in io.WriteCloser, out, errOut io.ReadCloser, src io.Reader, dst, dstErr io.Writer, closeStdinHCS func() error, logger *log.Entry) *relay {
	r := &relay{
		in:            in,
		out:           out,
		errOut:        errOut,
		closeStdinHCS: closeStdinHCS,
		log:           logger,
		outputDone:    make(chan struct{}),
	}
	if in != nil && src != nil {
		go func() {
			_, err := io.Copy(in, src)
			if err != nil && !errors.Is(err, io.ErrClosedPipe) {
				r.log.WithError(err).Debug("stdin copy ended")
			}
			if err := r.closeStdin(); err != nil {
				r.log.WithError(err).Debug("close stdin after its copy")
			}
		}()
	} else if in != nil {
		// Nothing will ever be written: let the process read EOF.
		if err := r.closeStdin(); err != nil {
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
		r.closeOutput()
		close(r.outputDone)
	}()
	return r
}

// closeStdin closes the process's stdin once: HCS's CloseStdin (the
// process reads EOF), then the backend's end of the pipe. It returns the
// first attempt's error.
func (r *relay) closeStdin() error {
	r.stdinOnce.Do(func() {
		if r.in == nil {
			return
		}
		var errs []error
		if r.closeStdinHCS != nil {
			errs = append(errs, r.closeStdinHCS())
		}
		errs = append(errs, r.in.Close())
		r.stdinErr = errors.Join(errs...)
	})
	return r.stdinErr
}

// closeStdinPipe closes the backend's end of stdin without asking HCS: for
// a process that has exited.
func (r *relay) closeStdinPipe() {
	r.stdinOnce.Do(func() {
		if r.in != nil {
			r.in.Close()
		}
	})
}

// closeOutput closes the output pipes, ending their copies.
func (r *relay) closeOutput() {
	r.outputOnce.Do(func() {
		if r.out != nil {
			r.out.Close()
		}
		if r.errOut != nil {
			r.errOut.Close()
		}
	})
}
