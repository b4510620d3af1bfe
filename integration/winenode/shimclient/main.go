//go:build windows

// Command shimclient speaks the task API to a shim's named pipe as
// containerd.exe does, for the Windows node's tests, which run it under
// Wine, where no Linux process can reach a pipe:
//
//	shimclient connect PIPE NAMESPACE TASK
//
// calls Connect and prints the PIDs the shim answers;
//
//	shimclient create PIPE NAMESPACE TASK BUNDLE
//
// serves stdin, stdout and stderr pipes as containerd's cio does, calls
// Create with them, and prints Create's answer and, for each pipe, whether
// the shim connected it and closed it again;
//
//	shimclient stat PIPE
//
// opens and closes PIPE once (os.Stat), using up the placeholder instance
// Wine 8 gives a go-winio pipe's first client;
//
//	shimclient mem NAME
//
// prints the PID, working set and private bytes of each process whose
// image is NAME, as Windows reports them to a program;
//
//	shimclient imagecheck ADDRESS NAMESPACE CONTAINER N
//
// times the shim's image check (shim/imagecheck, over containerd's gRPC
// at ADDRESS as the shim reaches it) of CONTAINER: on a connection made by
// its first call, as the shim's first create once made it; on one made
// beforehand, as the shim's first create makes it now; and N times more on
// that one, the median, as a shim's later creates.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/Microsoft/go-winio"
	taskv3 "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/ttrpc"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 5 && os.Args[1] == "connect":
		err = withClient(os.Args[2], os.Args[3], func(ctx context.Context, c taskv3.TTRPCTaskService) error {
			r, err := c.Connect(ctx, &taskv3.ConnectRequest{ID: os.Args[4]})
			if err != nil {
				return fmt.Errorf("Connect %s: %w", os.Args[4], err)
			}
			fmt.Printf("shim_pid=%d task_pid=%d version=%s\n", r.ShimPid, r.TaskPid, r.Version)
			return nil
		})
	case len(os.Args) == 6 && os.Args[1] == "create":
		err = withClient(os.Args[2], os.Args[3], func(ctx context.Context, c taskv3.TTRPCTaskService) error {
			return create(ctx, c, os.Args[4], os.Args[5])
		})
	case len(os.Args) == 3 && os.Args[1] == "stat":
		_, err = os.Stat(os.Args[2])
	case len(os.Args) == 3 && os.Args[1] == "mem":
		err = memory(os.Args[2])
	case len(os.Args) == 6 && os.Args[1] == "imagecheck":
		err = imageCheckTimes(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	default:
		fmt.Fprintln(os.Stderr, "usage: shimclient connect PIPE NAMESPACE TASK | shimclient create PIPE NAMESPACE TASK BUNDLE | shimclient stat PIPE | shimclient mem NAME | shimclient imagecheck ADDRESS NAMESPACE CONTAINER N")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shimclient:", err)
		os.Exit(1)
	}
}

func withClient(pipe, ns string, do func(context.Context, taskv3.TTRPCTaskService) error) error {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), time.Minute)
	defer cancel()
	// Wine 8 hands the first client of a go-winio pipe to a placeholder
	// instance where it hangs; a stat uses that up (on Windows it does
	// nothing). containerd.exe's own dial retries past it.
	os.Stat(pipe)
	conn, err := winio.DialPipeContext(ctx, pipe)
	if err != nil {
		return fmt.Errorf("dial %s: %w", pipe, err)
	}
	client := ttrpc.NewClient(conn)
	defer client.Close()
	return do(ctx, taskv3.NewTTRPCTaskClient(client))
}

// create serves the task's stdio pipes, calls Create, and reports each
// pipe.
func create(ctx context.Context, c taskv3.TTRPCTaskService, id, bundle string) error {
	names := []string{"stdin", "stdout", "stderr"}
	paths := map[string]string{}
	reports := map[string]chan string{}
	for _, name := range names {
		path := fmt.Sprintf(`\\.\pipe\shimclient-%s-%d-%s`, id, time.Now().UnixNano(), name)
		l, err := winio.ListenPipe(path, nil)
		if err != nil {
			return err
		}
		// No stat here: containerd's cio uses up no placeholder, and the
		// shim's own dial makes up for it under Wine (shim/process).
		defer l.Close()
		paths[name], reports[name] = path, make(chan string, 1)
		go serve(l, reports[name])
	}
	_, err := c.Create(ctx, &taskv3.CreateTaskRequest{ID: id, Bundle: bundle, Stdin: paths["stdin"], Stdout: paths["stdout"], Stderr: paths["stderr"]})
	fmt.Printf("create: %v\n", err)
	for _, name := range names {
		select {
		case r := <-reports[name]:
			fmt.Printf("%s: %s\n", name, r)
		case <-time.After(10 * time.Second):
			fmt.Printf("%s: not connected\n", name)
		}
	}
	return nil
}

// serve accepts the shim's connection to one stdio pipe and reports it
// once the shim has closed it.
func serve(l net.Listener, report chan<- string) {
	conn, err := l.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	switch {
	case err == nil, errors.Is(err, io.EOF):
		report <- fmt.Sprintf("connected, then closed by the shim (%d bytes)", n)
	default:
		report <- fmt.Sprintf("connected, then %v", err)
	}
}
