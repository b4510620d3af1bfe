// Package manager is the shim binary's side of containerd's runtime v2
// bootstrap (pkg/shim's Shim interface): `start` finds or launches the shim
// that serves a task, `delete` cleans up after a shim that died, `-info`
// describes the runtime.
//
// One shim serves a whole pod, as runhcs does: a container whose spec
// carries io.kubernetes.cri.sandbox-id joins the shim of that sandbox;
// a container without CRI annotations gets a shim of its own.
package manager

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	apitypes "github.com/containerd/containerd/api/types"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/containerdconn"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/internal/version"
	"github.com/winproc/winproc/shim/backend"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/shim/pauseimage"
)

// sandboxIDAnnotation groups a pod's containers into its sandbox's shim.
const sandboxIDAnnotation = "io.kubernetes.cri.sandbox-id"

// deleteTimeout bounds the clean-up of a dead shim's compute system.
const deleteTimeout = 60 * time.Second

// Manager implements pkg/shim's Shim.
type Manager struct {
	name string
}

var _ shim.Shim = (*Manager)(nil)

// New returns the manager of runtime name.
func New(name string) *Manager {
	return &Manager{name: name}
}

// Name is the runtime type, e.g. io.containerd.winproc.v2.
func (m *Manager) Name() string { return m.name }

// Info describes the runtime for `containerd-shim-winproc-v2 -info`.
func (m *Manager) Info(context.Context, io.Reader) (*apitypes.RuntimeInfo, error) {
	return &apitypes.RuntimeInfo{
		Name:    m.name,
		Version: &apitypes.RuntimeVersion{Version: version.Version},
	}, nil
}

// Stop is `delete`: containerd runs it in the bundle of a task whose shim is
// gone, to release what the shim held. It ends the task's compute system if
// one is left, releases what the shim held in containerd for it, and
// reports the task as killed (exit status 255, as runhcs).
func (m *Manager) Stop(ctx context.Context, id string) (shim.StopStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	status := shim.StopStatus{ExitStatus: 255, ExitedAt: time.Now()}
	errs := []error{m.stopSystem(ctx, id)}
	// After the system: its scratch is the snapshot being released.
	if err := releasePauseRootfs(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("release what the shim of task %s held in containerd: %w", id, err))
	}
	if err := removeDeadSocket(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("task %s: %w", id, err))
	}
	return status, errors.Join(errs...)
}

// stopSystem terminates and releases a dead shim's compute system, if one
// is left.
func (m *Manager) stopSystem(ctx context.Context, id string) error {
	b, err := backend.Open(ctx)
	if err != nil {
		return fmt.Errorf("open compute backend to clean up task %s: %w", id, err)
	}
	if err := compute.Teardown(ctx, b, id); err != nil {
		return fmt.Errorf("clean up task %s: %w", id, err)
	}
	log.G(ctx).WithField("task", id).Info("cleaned up the compute system of a dead shim")
	return nil
}

// releasePauseRootfs frees what a dead shim held in containerd for task id:
// when id is a sandbox the shim owned, its pause rootfs (snapshot and
// lease), which nothing else would ever remove; nothing held is no error.
// containerd passes its address to `delete` as the -address flag, which
// pkg/shim has parsed.
func releasePauseRootfs(ctx context.Context, id string) error {
	f := flag.Lookup("address")
	if f == nil || f.Value.String() == "" {
		return fmt.Errorf("no containerd address (-address) to release the pause rootfs of %s", id)
	}
	conn, err := containerdconn.Dial(f.Value.String())
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	defer conn.Close()
	return pauseimage.Release(ctx, conn, containerdnames.Snapshotter, id)
}

// runtimeOptions returns the handler's options (the TOML body containerd
// forwards for a runtime type it does not know), refusing bad ones before
// any shim starts.
func runtimeOptions(params *bootapi.BootstrapParams) ([]byte, error) {
	var ro runtimeoptions.Options
	if _, err := params.FindExtension(&ro); err != nil {
		return nil, fmt.Errorf("read runtime options: %w", err)
	}
	body := []byte(ro.GetConfigBody())
	if _, err := options.Decode(body); err != nil {
		return nil, err
	}
	return body, nil
}

// panicLogName is the file in the bundle that takes the serving shim's
// standard error, as runhcs keeps it. On Windows that is where a panic
// lands: the shim's logs go to containerd's log pipe, stderr stays here. On
// Linux pkg/shim moves stderr onto containerd's log fifo once the shim
// serves, so a panic reaches containerd's log (which outlives the bundle),
// and this file keeps only what is printed before that.
const panicLogName = "panic.log"

// group returns the shim a task belongs to: its pod's sandbox, or itself.
// A sandbox's own bundle may hold no spec (containerd's shim sandboxer
// makes it with none): the sandbox is its own group.
func group(id string) (string, error) {
	b, err := os.ReadFile("config.json")
	if errors.Is(err, os.ErrNotExist) {
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("read the bundle's config.json: %w", err)
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return "", fmt.Errorf("decode the bundle's config.json: %w", err)
	}
	if sandbox := spec.Annotations[sandboxIDAnnotation]; sandbox != "" {
		return sandbox, nil
	}
	return id, nil
}
