//go:build windows

package manager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/Microsoft/go-winio"
	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/options"
)

// shimPipe is the pipe of the shim of a pod, under the prefix where only
// administrators can create pipes: the manager dials it to find a running
// shim, and containerd talks to whatever answers.
func shimPipe(sum [sha256.Size]byte) string {
	return containerdnames.ProtectedPipePrefix + "winproc-shim-" + hex.EncodeToString(sum[:12])
}

// Start returns the named pipe of the shim serving the task: the running
// shim of its pod, or a new shim told to serve on that pipe (pkg/shim
// creates it; `start` returns once it answers).
func (m *Manager) Start(ctx context.Context, params *bootapi.BootstrapParams) (*bootapi.BootstrapResult, error) {
	id := params.GetInstanceID()
	grouping, err := group(id)
	if err != nil {
		return nil, err
	}
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(ns + "/" + grouping))
	address := shimPipe(sum)
	result := &bootapi.BootstrapResult{Version: 3, Protocol: "ttrpc", Address: address}

	timeout := 100 * time.Millisecond
	if c, err := winio.DialPipe(address, &timeout); err == nil {
		// The pod's shim is running: the task joins it.
		c.Close()
		return result, nil
	}

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	args := []string{"-namespace", ns, "-id", id, "-address", params.GetContainerdGrpcAddress(), "-socket", address}
	if params.GetLogLevel() <= bootapi.LogLevel_LOG_LEVEL_DEBUG {
		args = append(args, "-debug")
	}
	body, err := runtimeOptions(params)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), options.Env+"="+string(body))
	panicLog, err := openPanicLog()
	if err != nil {
		return nil, err
	}
	defer panicLog.Close()
	cmd.Stderr = panicLog
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launch shim for %s: %w", grouping, err)
	}
	go cmd.Wait()
	return result, nil
}
