//go:build windows

package manager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/Microsoft/go-winio"
	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/windows"

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
	args := []string{"-namespace", ns, "-id", id, "-address", params.GetContainerdGrpcAddress(), "-socket", address}
	if params.GetLogLevel() <= bootapi.LogLevel_LOG_LEVEL_DEBUG {
		args = append(args, "-debug")
	}
	body, err := runtimeOptions(params)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	// Not in the bundle: containerd renames the bundle away right after
	// the shim's last reply, and Windows refuses while a process has its
	// working directory there.
	cmd.Dir = filepath.Dir(self)
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

// openPanicLog opens the panic log for the serving shim's standard error,
// shared for deletion: the serving shim holds it open to its end, and
// containerd renames the bundle away (which the open file would refuse
// otherwise) right after the shim's last reply.
func openPanicLog() (*os.File, error) {
	name, err := windows.UTF16PtrFromString(panicLogName)
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateFile(name, windows.FILE_APPEND_DATA,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_ALWAYS, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return nil, fmt.Errorf("open the shim's panic log in the bundle: %w", err)
	}
	return os.NewFile(uintptr(h), panicLogName), nil
}
