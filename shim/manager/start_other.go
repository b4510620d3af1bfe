//go:build !windows

package manager

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/winproc/winproc/shim/options"
)

// Start returns the address of the shim serving the task: the running shim
// of its pod, or a new shim listening on a socket made here and handed over
// as fd 3.
func (m *Manager) Start(ctx context.Context, params *bootapi.BootstrapParams) (*bootapi.BootstrapResult, error) {
	id := params.GetInstanceID()
	grouping, err := group(id)
	if err != nil {
		return nil, err
	}
	socketDir := params.GetSocketDir()
	if socketDir == "" {
		socketDir = filepath.Join(defaults.DefaultStateDir, "s")
	}
	address, err := shim.CreateSocketAddress(ctx, socketDir, params.GetContainerdGrpcAddress(), grouping, false)
	if err != nil {
		return nil, err
	}
	result := &bootapi.BootstrapResult{Version: 3, Protocol: "ttrpc", Address: address}

	listener, err := shim.NewSocket(address)
	if err != nil {
		if !shim.SocketEaddrinuse(err) {
			return nil, fmt.Errorf("create shim socket %s: %w", address, err)
		}
		if shim.CanConnect(address) {
			// The pod's shim is running: the task joins it.
			return result, nil
		}
		// A socket left by a shim that died.
		if err := shim.RemoveSocket(address); err != nil {
			return nil, fmt.Errorf("remove stale shim socket %s: %w", address, err)
		}
		if listener, err = shim.NewSocket(address); err != nil {
			return nil, fmt.Errorf("create shim socket %s: %w", address, err)
		}
	}
	// The socket file must outlive this process's listener: the shim serves
	// on the descriptor.
	listener.SetUnlinkOnClose(false)
	f, err := listener.File()
	listener.Close()
	if err != nil {
		shim.RemoveSocket(address)
		return nil, err
	}
	defer f.Close()

	cmd, err := m.command(ctx, id, params)
	if err != nil {
		shim.RemoveSocket(address)
		return nil, err
	}
	body, err := runtimeOptions(params)
	if err != nil {
		shim.RemoveSocket(address)
		return nil, err
	}
	cmd.Env = append(cmd.Env, options.Env+"="+string(body), SocketEnv+"="+address)
	cmd.ExtraFiles = []*os.File{f}
	panicLog, err := openPanicLog()
	if err != nil {
		shim.RemoveSocket(address)
		return nil, err
	}
	defer panicLog.Close()
	cmd.Stderr = panicLog
	if err := cmd.Start(); err != nil {
		shim.RemoveSocket(address)
		return nil, fmt.Errorf("launch shim for %s: %w", grouping, err)
	}
	// The shim outlives this `start` process; reap it if it dies first.
	go cmd.Wait()
	return result, nil
}

func (m *Manager) command(ctx context.Context, id string, params *bootapi.BootstrapParams) (*exec.Cmd, error) {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	args := []string{"-namespace", ns, "-id", id, "-address", params.GetContainerdGrpcAddress()}
	if params.GetLogLevel() <= bootapi.LogLevel_LOG_LEVEL_DEBUG {
		args = append(args, "-debug")
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

func openPanicLog() (*os.File, error) {
	f, err := os.OpenFile(panicLogName, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the shim's panic log in the bundle: %w", err)
	}
	return f, nil
}
