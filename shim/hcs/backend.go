package hcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
	winrecord "github.com/winproc/winproc/shim/record"
	"github.com/winproc/winproc/shim/scratch"
)

// hcsAPI is what the backend needs of Windows: compute systems through
// HCS's schema-v2 API (computeCore over the computecore.dll binding),
// Container Credential Guard instances, hcsshim's public layer functions,
// and host facts. On Windows, windowsAPI implements it; the backend's tests
// use a fake.
type hcsAPI interface {
	// createContainer creates a compute system from its document.
	createContainer(ctx context.Context, id string, doc *schema2.ComputeSystem) (hcsContainer, error)
	// openContainer opens an existing compute system.
	openContainer(ctx context.Context, id string) (hcsContainer, error)
	// listSystems lists the compute systems of an owner.
	listSystems(ctx context.Context, owner string) ([]systemSummary, error)
	// addCredentialGuard makes the Container Credential Guard instance of
	// container id for a gMSA credential spec; removeCredentialGuard
	// removes it.
	addCredentialGuard(id, spec string) (*schema2.ContainerCredentialGuardState, error)
	removeCredentialGuard(id string) error
	// layerID is hcsshim.NameToGuid(name).ToString().
	layerID(name string) (string, error)
	// Layers are hcsshim's layer functions on the layer directory path
	// (scratch.Host).
	scratch.Layers
	// resolvePath is go-winio's fs.ResolvePath, which runhcs applies to
	// every mapped directory: HCS mis-resolves a file's path through a
	// symbolic link.
	resolvePath(path string) (string, error)
	// hostBuild is osversion.Build().
	hostBuild() uint16
	// activeProcessors is GetActiveProcessorCount(ALL_PROCESSOR_GROUPS):
	// the host's logical processors in every processor group; 0 when the
	// call fails.
	activeProcessors() uint32
	// facts reads an error returned by any of these methods.
	facts(err error) errFacts
}

// hcsContainer is a compute system handle (coreSystem).
type hcsContainer interface {
	Start(ctx context.Context) error
	// Shutdown and Terminate return once HCS accepted the request; the
	// stop shows on Wait.
	Shutdown(ctx context.Context) error
	Terminate(ctx context.Context) error
	// CheckStopped asks HCS whether the system has stopped, and records
	// the stop if so: for a stop whose notification does not come.
	CheckStopped(ctx context.Context) (bool, error)
	// Wait returns when the system has stopped, or when Close closed the
	// handle (errHandleClosed).
	Wait() error
	Properties(ctx context.Context, types ...string) (*schema2.Properties, error)
	Modify(ctx context.Context, req *schema2.ModifySettingRequest) error
	SetAffinity(a []groupAffinity) error
	CreateProcess(ctx context.Context, params *schema2.ProcessParameters) (hcsProcess, error)
	Close() error
}

// hcsProcess is a process handle (coreProcess).
type hcsProcess interface {
	Pid() int
	// Signal delivers a console control event by HCS's name (CtrlC,
	// CtrlBreak, CtrlClose, CtrlLogOff, CtrlShutdown).
	Signal(ctx context.Context, signal string) error
	Kill(ctx context.Context) error
	// CheckExited asks HCS whether the process has exited, and records
	// the exit if so: for an exit whose notification does not come.
	CheckExited(ctx context.Context) (bool, error)
	// Wait returns when the process has exited, or when Close closed the
	// handle.
	Wait() error
	ExitCode() (int, error)
	ResizeConsole(ctx context.Context, width, height uint16) error
	// Stdio hands over the pipes HCS created; the caller closes them. A
	// pipe that was not requested is nil.
	Stdio() (io.WriteCloser, io.ReadCloser, io.ReadCloser, error)
	CloseStdin(ctx context.Context) error
	Close() error
}

// Options configure the HCS backend.
type Options struct {
	// StateDir holds a small record per system the backend created (see
	// record.go), naming the scratch layer it activated, so that a system
	// opened by a later shim (containerd's `shim delete` after a dead shim)
	// releases the scratch when it is closed. The serving shim and the
	// delete subcommand must use the same directory, one that outlives a
	// shim, such as a directory under containerd's state root. "" keeps no
	// records: Close of an opened system then cannot release its scratch.
	StateDir string
	// DrainTimeout bounds how long a process's output is still copied
	// after the process exited (a grandchild may hold the pipes open);
	// 0 is DefaultDrainTimeout.
	DrainTimeout time.Duration
}

const (
	// DefaultDrainTimeout is runhcs's CopyAfterExitTimeout.
	DefaultDrainTimeout = time.Second
	// lostProcessTimeout is how long a process may still run once its
	// system has stopped and it was killed, before the backend stops
	// waiting for HCS to report its exit.
	lostProcessTimeout = 10 * time.Second
	// closeWaitTimeout bounds how long Close waits for the system's wait
	// to notice the closed handle.
	closeWaitTimeout = 5 * time.Second
	// exitNoticeWait is how long a killed process's exit notification may
	// take before HCS is asked for the exit, and how often it is asked.
	exitNoticeWait = 5 * time.Second
	// exitChecks is how many times it is asked.
	exitChecks = 3
)

// Backend is the compute.Backend of Windows: process-isolated containers
// through HCS's schema-v2 API. It is safe for concurrent use.
type Backend struct {
	api     hcsAPI
	records records
	scratch scratch.Mounter
	drain   time.Duration
	// terminations are the systems being terminated in the background.
	terminations terminations
	// bg counts the backend's goroutines that outlive their caller: the
	// background terminates, the kills of processes whose system stopped,
	// the checks for a killed process's exit.
	bg sync.WaitGroup
	// Timings, shortened by tests.
	lostProcessTimeout time.Duration
	closeWaitTimeout   time.Duration
	terminateRetry     time.Duration
	terminateGiveUp    time.Duration
	exitNoticeWait     time.Duration
}

var _ compute.Backend = (*Backend)(nil)

func newBackend(api hcsAPI, opts Options) *Backend {
	drain := opts.DrainTimeout
	if drain <= 0 {
		drain = DefaultDrainTimeout
	}
	return &Backend{
		api:     api,
		records: records{dir: opts.StateDir},
		scratch: scratch.Mounter{
			Layers:     api,
			Fail:       func(what string, err error) error { return classify(what, err, api.facts(err)) },
			NotReady:   func(err error) bool { return api.facts(err).LayerNotReady },
			RetryDelay: scratch.RetryDelay,
		},
		drain:              drain,
		terminations:       terminations{dir: pendingTerminationsDir(opts.StateDir)},
		lostProcessTimeout: lostProcessTimeout,
		closeWaitTimeout:   closeWaitTimeout,
		terminateRetry:     terminateRetry,
		terminateGiveUp:    terminateGiveUp,
		exitNoticeWait:     exitNoticeWait,
	}
}

// HostCPUs is the number of the host's logical processors, in every
// processor group: Go's runtime.NumCPU sees only the process's group, at
// most 64. As runhcs (hcsshim internal/processorinfo, ProcessorCount), a
// failed count falls back to runtime.NumCPU.
func (b *Backend) HostCPUs() int {
	if n := b.api.activeProcessors(); n > 0 {
		return int(n)
	}
	return runtime.NumCPU()
}

// Create mounts the scratch layer over the image layers, then creates the
// compute system id; it does not start it. On failure everything done is
// undone in reverse order. The order, as runhcs's process isolation path
// (hcsshim internal/hcsoci CreateContainer):
//
//  1. refuse what the host cannot do (checkSettings);
//  2. refuse an existing system id before touching layers that system may
//     be using;
//  3. the image layers' ids (NameToGuid), the mapped directories' resolved
//     paths (fs.ResolvePath), and the document, which catches every
//     mistake before anything is touched;
//  4. record the scratch (record.go);
//  5. ExpandScratchSize for a sandbox size, ActivateLayer(scratch),
//     PrepareLayer(scratch, parents), GetLayerMountPath(scratch): the
//     scratch volume;
//  6. the Container Credential Guard instance of a gMSA container;
//  7. HcsCreateComputeSystem with the schema-v2 document;
//  8. the silo's processor affinity, before anything runs in it.
func (b *Backend) Create(ctx context.Context, id string, s *compute.Settings) (compute.System, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := checkSettings(s, b.api.hostBuild()); err != nil {
		return nil, fmt.Errorf("compute system %s: %w", id, err)
	}
	s, layers, err := b.prepare(ctx, id, s)
	if err != nil {
		return nil, err
	}

	b.releaseStale(ctx, id)
	rec := record{ID: id, Scratch: s.Layers.Scratch, CredentialGuard: s.CredentialSpec != "", Shim: winrecord.Self()}
	if err := b.records.write(rec); err != nil {
		return nil, err
	}
	undo := func() { b.releaseRecorded(ctx, rec) }
	if s.SandboxSizeBytes > 0 {
		if err := b.api.Expand(s.Layers.Scratch, s.SandboxSizeBytes); err != nil {
			b.removeRecord(ctx, id)
			return nil, classify(fmt.Sprintf("compute system %s: expand the scratch layer %s to %d bytes", id, s.Layers.Scratch, s.SandboxSizeBytes), err, b.api.facts(err))
		}
	}
	volume, err := b.scratch.Mount(ctx, s.Layers.Scratch, s.Layers.Parents)
	if err != nil {
		b.removeRecord(ctx, id)
		return nil, fmt.Errorf("compute system %s: %w", id, err)
	}
	var ccg *schema2.ContainerCredentialGuardState
	if s.CredentialSpec != "" {
		if ccg, err = b.api.addCredentialGuard(id, s.CredentialSpec); err != nil {
			undo()
			return nil, classify(fmt.Sprintf("compute system %s: the Container Credential Guard instance of its gMSA credential spec", id), err, b.api.facts(err))
		}
	}
	doc, err := containerDocument(id, s, mountedStorage{layers: layers, volume: volume}, ccg)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		undo()
		return nil, fmt.Errorf("compute system %s: %w", id, err)
	}
	c, err := b.api.createContainer(ctx, id, doc)
	if err != nil {
		var left *leftError
		if errors.As(err, &left) {
			// HCS still works on the create, with the scratch: it is
			// released once HCS has ended it and the core discarded what
			// it made.
			b.background(func() {
				<-left.done
				b.releaseRecorded(context.WithoutCancel(ctx), rec)
			})
		} else {
			undo()
		}
		return nil, classify(fmt.Sprintf("create compute system %s", id), err, b.api.facts(err))
	}
	sys := newSystem(b, id, c, rec)
	if a := s.Resources.CPUAffinity; len(a) > 0 {
		if err := c.SetAffinity(groupAffinities(a)); err != nil {
			err = classify(fmt.Sprintf("compute system %s: pin its silo to processors %v", id, a), err, b.api.facts(err))
			if terr := sys.Terminate(ctx); terr != nil {
				log.G(ctx).WithError(terr).Warn("terminate a compute system whose affinity failed")
			}
			sys.closeAfterStop(ctx)
			return nil, err
		}
	}
	return sys, nil
}

// prepare checks what Create needs before it touches anything: that no
// compute system of the id exists, the layers' ids, the mapped
// directories' host paths resolved (fs.ResolvePath), and the document
// with placeholders for what Create makes; it returns the settings with
// the resolved paths and the layers.
func (b *Backend) prepare(ctx context.Context, id string, s *compute.Settings) (*compute.Settings, []schema2.Layer, error) {
	if c, err := b.api.openContainer(ctx, id); err == nil {
		if cerr := c.Close(); cerr != nil {
			log.G(ctx).WithError(cerr).WithField("id", id).Warn("close the existing compute system")
		}
		return nil, nil, fmt.Errorf("compute system %s: %w", id, errdefs.ErrAlreadyExists)
	} else if f := b.api.facts(err); !f.NotExist {
		return nil, nil, classify(fmt.Sprintf("look for an existing compute system %s", id), err, f)
	}

	layers := make([]schema2.Layer, 0, len(s.Layers.Parents))
	for _, p := range s.Layers.Parents {
		lid, err := b.api.layerID(layerName(p))
		if err != nil {
			return nil, nil, classify(fmt.Sprintf("layer id of %s", p), err, b.api.facts(err))
		}
		layers = append(layers, schema2.Layer{Id: lid, Path: p})
	}
	resolved := *s
	resolved.MappedDirectories = append([]compute.MappedDirectory(nil), s.MappedDirectories...)
	for i, d := range resolved.MappedDirectories {
		p, err := b.api.resolvePath(d.HostPath)
		if err != nil {
			return nil, nil, classify(fmt.Sprintf("compute system %s: mount source %s", id, d.HostPath), err, b.api.facts(err))
		}
		resolved.MappedDirectories[i].HostPath = p
	}
	s = &resolved
	// The document with placeholders for what is made below: its checks
	// run before anything is touched.
	var ccg *schema2.ContainerCredentialGuardState
	if s.CredentialSpec != "" {
		ccg = &schema2.ContainerCredentialGuardState{}
	}
	if _, err := containerDocument(id, s, mountedStorage{layers: layers, volume: `\\?\Volume{}\`}, ccg); err != nil {
		return nil, nil, fmt.Errorf("compute system %s: %w", id, err)
	}
	return s, layers, nil
}

// background runs f on a goroutine of the backend's own (counted by bg).
func (b *Backend) background(f func()) {
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		f()
	}()
}

func groupAffinities(a []compute.CPUGroupAffinity) []groupAffinity {
	out := make([]groupAffinity, len(a))
	for i, g := range a {
		out[i] = groupAffinity{Mask: g.Mask, Group: g.Group}
	}
	return out
}

// releaseRecorded releases what rec says a system that is not running
// holds, its Container Credential Guard instance and its scratch, and
// forgets it once the scratch is released. Failures are logged only.
func (b *Backend) releaseRecorded(ctx context.Context, rec record) {
	if err := b.release(rec); err != nil {
		log.G(ctx).WithError(err).WithField("id", rec.ID).Warn("release what a compute system held")
	}
}

// release releases what rec names, then removes the record, unless the
// scratch is still active.
func (b *Backend) release(rec record) error {
	var errs []error
	if rec.CredentialGuard {
		if err := b.api.removeCredentialGuard(rec.ID); err != nil && !b.api.facts(err).NotExist {
			errs = append(errs, classify(fmt.Sprintf("remove the Container Credential Guard instance of %s", rec.ID), err, b.api.facts(err)))
		}
	}
	err := b.scratch.Release(rec.Scratch)
	if err != nil && winrecord.BootedSince(rec.Shim) {
		// The scratch's activation ended with the boot its shim ran in:
		// the layer functions refuse to release what is no longer held.
		log.L.WithError(err).WithField("id", rec.ID).Info("the node booted since the scratch was mounted: it is released")
		err = nil
	}
	if err != nil {
		errs = append(errs, err)
	}
	if !scratch.StillActive(err) {
		if rerr := b.records.remove(rec.ID); rerr != nil {
			errs = append(errs, rerr)
		}
	}
	return errors.Join(errs...)
}

// releaseStale releases the scratch recorded for id by a system that no
// longer exists (its shim died, and no delete cleaned up): the caller has
// just found no system id. Failures are logged only.
func (b *Backend) releaseStale(ctx context.Context, id string) {
	rec, err := b.records.read(id)
	if err != nil {
		log.G(ctx).WithError(err).Warn("ignore an unreadable layer record")
		return
	}
	if rec == nil {
		return
	}
	log.G(ctx).WithFields(log.Fields{"id": id, "scratch": rec.Scratch}).Info("releasing the scratch layer of a compute system that no longer exists")
	b.releaseRecorded(ctx, *rec)
}

func (b *Backend) removeRecord(ctx context.Context, id string) {
	if err := b.records.remove(id); err != nil {
		log.G(ctx).WithError(err).Warn("remove layer record")
	}
}

// Open attaches to the existing system id (HcsOpenComputeSystem) for the
// shim's delete subcommand. Its scratch comes from the record Create wrote;
// Close releases it once the system has stopped. When the system no longer
// exists, the recorded scratch is released here, since nothing else will
// (the error is still errdefs.ErrNotFound).
func (b *Backend) Open(ctx context.Context, id string) (compute.System, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	c, err := b.api.openContainer(ctx, id)
	if err != nil {
		f := b.api.facts(err)
		// A host without the compute service has no compute system left
		// to clean up either.
		f.NotExist = f.NotExist || f.ServiceMissing
		if f.NotExist {
			b.releaseStale(ctx, id)
		}
		return nil, classify(fmt.Sprintf("open compute system %s", id), err, f)
	}
	held := record{ID: id}
	rec, err := b.records.read(id)
	switch {
	case err != nil:
		log.G(ctx).WithError(err).Warn("ignore an unreadable layer record; the scratch layer will not be released")
	case rec == nil:
		log.G(ctx).WithField("id", id).Info("no layer record: closing this compute system will not release its scratch layer")
	default:
		held = *rec
	}
	return newSystem(b, id, c, held), nil
}
