//go:build !windows

package process

import "os"

// readySignal is how a logging binary says it is ready.
const readySignal = "descriptor 5 (or exiting)"

// newLoggerPipes makes the pipes of containerd's runc shim (NewBinaryIO):
// the binary inherits the read ends of stdout and stderr as descriptors 3
// and 4, and the write end of the ready pipe as 5.
func newLoggerPipes(string) (*loggerPipes, error) {
	var ends []*os.File
	closeAll := func() {
		for _, f := range ends {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			ends = append(ends, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	readyR, readyW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	inherited := []*os.File{outR, errR, readyW}
	return &loggerPipes{
		stdout: outW,
		stderr: errW,
		ready:  readyR,
		files:  inherited,
		started: func() {
			for _, f := range inherited {
				f.Close()
			}
		},
		close: closeAll,
	}, nil
}
