package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// loggerTimeout bounds how long a logging binary may take to signal that
// it is ready, and to exit once its input has ended before it is killed
// (runhcs: binaryCmdStartTimeout, binaryCmdWaitTimeout).
const loggerTimeout = 10 * time.Second

// loggerPipes are the shim's ends of a logging binary's input, and what
// the binary is given to find its own ends. Each platform makes them
// (newLoggerPipes): on Linux inherited descriptors 3, 4 and 5 as
// containerd's runc shim passes them, on Windows named pipes named in the
// environment as runhcs passes them.
type loggerPipes struct {
	stdout, stderr io.WriteCloser
	// ready gives a byte or EOF once the binary is ready to read.
	ready io.ReadCloser
	// env and files are added to the binary's environment and inherited
	// descriptors.
	env   []string
	files []*os.File
	// started releases the ends the binary inherited, once it has.
	started func()
	// close releases every end still held after a failure.
	close func()
}

// binaryLogger is a running logging binary. Close waits for it to exit,
// which it does once stdout and stderr are closed; streams.Close closes
// those first.
type binaryLogger struct {
	cmd   *exec.Cmd
	ready io.Closer
	done  chan error
}

// startLogger starts the logging binary of l for process id and waits for
// it to be ready. The binary gets CONTAINER_ID (the process's id: the
// container's for its init process) and CONTAINER_NAMESPACE, as in
// containerd's NewBinaryIO (cmd/containerd-shim-runc-v2/process/io.go)
// and runhcs's NewBinaryIO (hcsshim internal/cmd/io_binary.go).
func startLogger(ctx context.Context, id string, l *logURI) (_ *streams, retErr error) {
	ns, ok := namespaces.Namespace(ctx)
	if !ok {
		ns = namespaces.Default
	}
	p, err := newLoggerPipes(id)
	if err != nil {
		return nil, fmt.Errorf("pipes to logging binary %s: %w", l.path, err)
	}
	defer func() {
		if retErr != nil {
			p.close()
		}
	}()
	cmd := exec.Command(l.path, l.args...)
	cmd.Env = append([]string{"CONTAINER_ID=" + id, "CONTAINER_NAMESPACE=" + ns}, p.env...)
	cmd.ExtraFiles = p.files
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start logging binary %s: %w", l.path, err)
	}
	p.started()
	lg := &binaryLogger{cmd: cmd, ready: p.ready, done: make(chan error, 1)}
	go func() { lg.done <- cmd.Wait() }()

	ready := make(chan error, 1)
	go func() {
		_, err := p.ready.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			err = nil
		}
		ready <- err
	}()
	// A binary that exits closes its end too: that counts as ready, as in
	// both references.
	select {
	case err = <-ready:
	case <-time.After(loggerTimeout):
		err = fmt.Errorf("not ready after %s", loggerTimeout)
	}
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("logging binary %s: %v; it must signal ready by closing %s: %w", l.path, err, readySignal, errdefs.ErrFailedPrecondition)
	}
	return &streams{stdout: p.stdout, stderr: p.stderr, keepAlive: []io.Closer{lg}}, nil
}

// Close waits for the logging binary to exit, killing it when it outlives
// loggerTimeout.
func (lg *binaryLogger) Close() error {
	lg.ready.Close()
	select {
	case err := <-lg.done:
		return err
	case <-time.After(loggerTimeout):
		lg.cmd.Process.Kill()
		return fmt.Errorf("logging binary %s did not exit %s after its input ended; killed it", lg.cmd.Path, loggerTimeout)
	}
}

// openStdio connects the process's stdio: to containerd's fifos or pipes,
// or, for a log URI in stdout, to a logging binary or a log file. A log
// URI comes without stdin (containerd's cio.LogURI sets none; neither
// reference connects one).
func openStdio(ctx context.Context, id string, stdio Stdio) (*streams, error) {
	l, err := parseLogURI(stdio.Stdout)
	if err != nil {
		return nil, err
	}
	switch {
	case l == nil:
		return openStreams(ctx, stdio)
	case stdio.Stdin != "":
		return nil, fmt.Errorf("stdin %s with log URI %s: a process logging to a URI has no stdin; drop one of them: %w", stdio.Stdin, stdio.Stdout, errdefs.ErrInvalidArgument)
	case l.binary:
		return startLogger(ctx, id, l)
	}
	return openLogFile(l)
}

// openLogFile appends both output streams to the file of l, as
// containerd's runc shim does for file:// (createIO).
func openLogFile(l *logURI) (_ *streams, retErr error) {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return nil, fmt.Errorf("directory of log file %s: %w", l.path, err)
	}
	s := &streams{}
	defer func() {
		if retErr != nil {
			s.Close()
		}
	}()
	for _, dst := range []*io.WriteCloser{&s.stdout, &s.stderr} {
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return nil, fmt.Errorf("open log file %s: %w", l.path, err)
		}
		*dst = f
	}
	return s, nil
}
