//go:build windows

// Command connect calls the task API's Connect on a shim's named pipe, as
// containerd.exe does, and prints the PIDs the shim answers: the Windows
// node's tests run it under Wine, where no Linux process can reach a pipe.
//
// usage: connect PIPE NAMESPACE TASK
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/Microsoft/go-winio"
	taskv3 "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/ttrpc"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: connect PIPE NAMESPACE TASK")
		os.Exit(2)
	}
	if err := connect(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
}

func connect(pipe, ns, id string) error {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), 30*time.Second)
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
	r, err := taskv3.NewTTRPCTaskClient(client).Connect(ctx, &taskv3.ConnectRequest{ID: id})
	if err != nil {
		return fmt.Errorf("Connect %s: %w", id, err)
	}
	fmt.Printf("shim_pid=%d task_pid=%d version=%s\n", r.ShimPid, r.TaskPid, r.Version)
	return nil
}
