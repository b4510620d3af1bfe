//go:build linux

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/syncbuffer"
)

// eofReader reports when its reader has been read to the end.
type eofReader struct {
	r   io.Reader
	eof chan struct{}
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		select {
		case <-e.eof:
		default:
			close(e.eof)
		}
	}
	return n, err
}

// execEcho execs `winproc-testapp echo` in task with payload as its stdin
// and returns what the exec wrote back and its exit status. CloseIO comes
// as CRI sends it, right after the client's input has ended (the client's
// fifo end may still be open, and the shim's copy still running); with
// early it comes right after Start instead, before the input was read.
func execEcho(t testing.TB, task containerd.Task, id string, payload []byte, early bool) ([]byte, uint32) {
	t.Helper()
	spec, err := task.Spec(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := *spec.Process
	p.Args = []string{testApp, "echo"}
	p.Terminal = false
	return feedEcho(t, payload, early, func(c cio.Creator) (containerd.Process, error) {
		return task.Exec(context.Background(), id, &p, c)
	})
}

// feedEcho creates a process that echoes its stdin (create), feeds it
// payload, closes its stdin as execEcho says, and returns what came back
// and the exit status. It deletes the process.
func feedEcho(t testing.TB, payload []byte, early bool, create func(cio.Creator) (containerd.Process, error)) ([]byte, uint32) {
	t.Helper()
	ctx := context.Background()
	in := &eofReader{r: bytes.NewReader(payload), eof: make(chan struct{})}
	var out, errOut syncbuffer.Buffer
	proc, err := create(cio.NewCreator(cio.WithStreams(in, &out, &errOut), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	done, err := proc.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !early {
		<-in.eof
	}
	if err := proc.CloseIO(ctx, containerd.WithStdinCloser); err != nil {
		t.Fatalf("CloseIO of %s: %v", proc.ID(), err)
	}
	st := waitStatus(t, done)
	// The shim has written all output when the exit is final; the client's
	// copy ends at the fifo's EOF. Delete cancels that copy, so it waits
	// for it first, as CRI waits for its attach.
	proc.IO().Wait()
	if _, err := proc.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if errOut.String() != "" {
		t.Errorf("%s stderr: %q", proc.ID(), errOut.String())
	}
	return []byte(out.String()), st.ExitCode()
}

// Every byte an exec's client writes before CloseIO reaches the process,
// then EOF, through the real containerd: 100 execs of 200 KB and more,
// CloseIO at either end of the client's copy.
func TestExecStdinNoByteLost(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	task, out := startTestApp(t, n, newClient(t, n), "stdin", "sleep", "-seconds", "0")
	out.waitFor(t, "ready")

	const cycles = 100
	rng := rand.New(rand.NewPCG(1, 2))
	var sent, lost int
	for i := range cycles {
		payload := make([]byte, 200_000+rng.IntN(56_000))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		got, code := execEcho(t, task, fmt.Sprintf("echo-%d", i), payload, i%2 == 1)
		sent += len(payload)
		if code != 0 || sha256.Sum256(got) != sha256.Sum256(payload) {
			lost += len(payload) - len(got)
			t.Errorf("exec %d (CloseIO early %v): exit %d, %d bytes back of %d", i, i%2 == 1, code, len(got), len(payload))
		}
	}
	t.Logf("%d execs, %d bytes through stdin and back, %d lost", cycles, sent, lost)
}

// The same for a container's init process: every byte written to a task's
// stdin before CloseIO reaches it, then EOF.
func TestTaskStdinNoByteLost(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	client := newClient(t, n)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 4 {
		payload := make([]byte, 200_000+rng.IntN(56_000))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		c := newContainer(t, n, client, testAppImage, fmt.Sprintf("echo-task-%d", i), podMember{}, []string{testApp, "echo"})
		got, code := feedEcho(t, payload, i%2 == 1, func(cr cio.Creator) (containerd.Process, error) {
			return c.NewTask(context.Background(), cr)
		})
		if code != 0 || sha256.Sum256(got) != sha256.Sum256(payload) {
			t.Errorf("task %d (CloseIO early %v): exit %d, %d bytes back of %d", i, i%2 == 1, code, len(got), len(payload))
		}
	}
}
