// Package scratch mounts a container's scratch layer over its image layers
// as a volume, and releases it again: hcsshim's ActivateLayer,
// PrepareLayer and GetLayerMountPath, then UnprepareLayer and
// DeactivateLayer, as runhcs mounts the storage of process-isolated and
// HostProcess containers (hcsshim internal/layers,
// mountProcessIsolatedWCIFSLayers). The HCS backend hands the volume to
// HCS; the HostProcess backend mounts it at a directory on the host.
//
// The sequencing is platform-neutral and tested on Linux against a fake of
// Layers; Host (Windows only) is hcsshim's functions.
package scratch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
)

// Layers are hcsshim's layer functions on a layer directory's full path.
type Layers interface {
	Activate(path string) error
	Prepare(path string, parents []string) error
	// MountPath is the volume of an activated and prepared scratch,
	// \\?\Volume{GUID}\.
	MountPath(path string) (string, error)
	Unprepare(path string) error
	Deactivate(path string) error
	// Expand grows the scratch's VHD to size bytes, before activation.
	Expand(path string, size uint64) error
}

const (
	// Attempts and RetryDelay are hcsshim's retry of activation on
	// ERROR_NOT_READY and ERROR_DEVICE_NOT_CONNECTED (loopback VHDs on
	// Windows Server 2019 under load).
	Attempts   = 5
	RetryDelay = 100 * time.Millisecond
)

// Mounter mounts and releases scratch layers with a backend's own reading
// of the layer functions' errors.
type Mounter struct {
	Layers Layers
	// Fail wraps a layer function's error with what failed ("activate
	// scratch layer C:\...") and the backend's errdefs class for it.
	Fail func(what string, err error) error
	// NotReady reports an error hcsshim retries activation after.
	NotReady func(err error) bool
	// RetryDelay is the pause between attempts; tests shorten it.
	RetryDelay time.Duration
}

// Mount activates and prepares the scratch over its parents (nearest
// first) and returns its volume, undoing what it did on failure.
// Activation and preparation are retried as hcsshim does when a loopback
// VHD is not ready.
func (m Mounter) Mount(ctx context.Context, scratch string, parents []string) (string, error) {
	for attempt := 1; ; attempt++ {
		op, err := m.activateAndPrepare(scratch, parents)
		if err == nil {
			break
		}
		if !m.NotReady(err) || attempt == Attempts {
			return "", m.Fail(fmt.Sprintf("%s scratch layer %s", op, scratch), err)
		}
		log.G(ctx).WithError(err).WithField("scratch", scratch).Warnf("%s scratch layer: not ready; retrying", op)
		select {
		case <-time.After(m.RetryDelay):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	mount, err := m.Layers.MountPath(scratch)
	if err != nil {
		err = m.Fail(fmt.Sprintf("volume of scratch layer %s", scratch), err)
	} else if strings.TrimRight(mount, `\`) == "" {
		err = fmt.Errorf("the scratch layer %s has no volume once activated: is it a process-isolation scratch (sandbox.vhdx)?: %w", scratch, errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		if uerr := m.Release(scratch); uerr != nil {
			log.G(ctx).WithError(uerr).WithField("scratch", scratch).Warn("release the scratch layer after a failure")
		}
		return "", err
	}
	return mount, nil
}

// activateAndPrepare is ActivateLayer then PrepareLayer, deactivating
// again when the prepare fails. It returns the step that failed and
// hcsshim's error.
func (m Mounter) activateAndPrepare(scratch string, parents []string) (string, error) {
	if err := m.Layers.Activate(scratch); err != nil {
		return "activate", err
	}
	if err := m.Layers.Prepare(scratch, parents); err != nil {
		if derr := m.Layers.Deactivate(scratch); derr != nil {
			log.L.WithError(derr).WithField("scratch", scratch).Warn("deactivate the scratch layer after a failed prepare")
		}
		return "prepare", err
	}
	return "", nil
}

// Release undoes Mount: UnprepareLayer, then DeactivateLayer, both
// attempted. The scratch is released once DeactivateLayer succeeded (an
// UnprepareLayer error is still reported); when it failed, StillActive
// holds for the error.
func (m Mounter) Release(scratch string) error {
	var errs []error
	if err := m.Layers.Unprepare(scratch); err != nil {
		errs = append(errs, m.Fail(fmt.Sprintf("unprepare scratch layer %s", scratch), err))
	}
	if err := m.Layers.Deactivate(scratch); err != nil {
		errs = append(errs, &deactivateError{m.Fail(fmt.Sprintf("deactivate scratch layer %s", scratch), err)})
	}
	return errors.Join(errs...)
}

// deactivateError marks a failed DeactivateLayer: the scratch is still
// active.
type deactivateError struct{ err error }

func (e *deactivateError) Error() string { return e.err.Error() }
func (e *deactivateError) Unwrap() error { return e.err }

// StillActive reports whether err, from Release, left the scratch active,
// so that whoever records it must keep the record.
func StillActive(err error) bool {
	var d *deactivateError
	return errors.As(err, &d)
}
