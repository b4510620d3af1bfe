package jobcontainer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hostprocess"
	"github.com/winproc/winproc/shim/record"
	"github.com/winproc/winproc/shim/scratch"
)

// host is what the backend needs of Windows: the binding's system calls,
// hcsshim's layer functions, the file system, and the reading of their
// errors. On Windows, windowsHost implements it; the Linux tests use a
// fake.
type host interface {
	binding
	scratch.Layers
	// isFile and isDir report whether path is an existing file (not a
	// directory), or directory.
	isFile(path string) bool
	isDir(path string) bool
	mkdirAll(path string) error
	// symlink makes link a symbolic link to target (os.Symlink: a
	// directory link when target is a directory); isLink reports whether
	// path is one.
	symlink(target, link string) error
	isLink(path string) bool
	// remove removes a file, a link or an empty directory.
	remove(path string) error
	// bindFilter reports whether the host has the bind filter's API,
	// bindfltapi.dll; bind and unbind are its BfSetupFilter and
	// BfRemoveMapping for the whole host, a second binding at a root
	// refused. Unbinding a root without a binding is
	// ERROR_INVALID_PARAMETER (microsoft/go-winio#274).
	bindFilter() bool
	bind(root, source string, readOnly bool) error
	unbind(root string) error
	facts(err error) errFacts
}

// rootfs makes a container's layers visible at its mount point, and takes
// them away. The backend's own are bindRootfs where the host has the bind
// filter and volumeRootfs where it has not; the Windows tests under Wine,
// which has no layer functions and no volume mount points, put a
// directory there instead.
type rootfs interface {
	// mount makes the scratch over its parents visible at dir, growing
	// the scratch to size bytes first when size is not 0.
	mount(ctx context.Context, l compute.Layers, size uint64, dir string) error
	// unmount undoes mount; released is false while the scratch is still
	// held (its record must stay).
	unmount(ctx context.Context, scratchDir, dir string) (released bool, err error)
}

// Options configure the HostProcess backend.
type Options struct {
	// StateDir holds a record per container (shim/record): its scratch
	// layer, mount point and temporary users, so that containerd's `shim
	// delete` after a dead shim releases them. The serving shim and the
	// delete subcommand must use the same directory. "" keeps none.
	StateDir string
	// MountRoot is the directory under which each container's rootfs is
	// mounted, at <MountRoot>\<id>; "" is DefaultMountRoot.
	MountRoot string
	// DrainTimeout bounds how long a process's output is still copied
	// after the process exited (a process it started may hold the pipes
	// open); 0 is DefaultDrainTimeout.
	DrainTimeout time.Duration
}

const (
	// DefaultMountRoot is runhcs's rootfs location without the bind
	// filter: C:\hpc\<id>.
	DefaultMountRoot = `C:\hpc`
	// DefaultDrainTimeout is runhcs's CopyAfterExitTimeout.
	DefaultDrainTimeout = time.Second
	// messageTimeout bounds a wait for the job's messages, after which
	// the job's process count is read anyway (Windows does not promise to
	// deliver job messages).
	messageTimeout = 5 * time.Second
	// pollInterval is how often an opened system, which has no
	// completion port, reads its job's process count.
	pollInterval = 100 * time.Millisecond
)

// Backend is the compute.Backend of HostProcess containers: each system is
// a job object whose processes run on the host, as runhcs's
// internal/jobcontainers. MAPPING.md maps the contract onto the Windows
// calls. It is safe for concurrent use.
type Backend struct {
	host   host
	rootfs rootfs
	// binds: mapped directories are bind filter bindings, not links.
	binds     bool
	scratch   scratch.Mounter
	records   record.Dir
	mountRoot string
	drain     time.Duration
	// Timings, shortened by tests.
	messageTimeout time.Duration
	pollInterval   time.Duration
}

var _ compute.Backend = (*Backend)(nil)

func newBackend(h host, opts Options) *Backend {
	b := &Backend{
		host:           h,
		records:        record.Dir(opts.StateDir),
		mountRoot:      strings.TrimRight(opts.MountRoot, `\`),
		drain:          opts.DrainTimeout,
		messageTimeout: messageTimeout,
		pollInterval:   pollInterval,
	}
	if b.mountRoot == "" {
		b.mountRoot = DefaultMountRoot
	}
	if b.drain <= 0 {
		b.drain = DefaultDrainTimeout
	}
	b.scratch = scratch.Mounter{
		Layers:     h,
		Fail:       func(what string, err error) error { return classify(what, err, h.facts(err)) },
		NotReady:   func(err error) bool { return h.facts(err).LayerNotReady },
		RetryDelay: scratch.RetryDelay,
	}
	b.rootfs = volumeRootfs{b}
	if h.bindFilter() {
		b.rootfs, b.binds = bindRootfs{b}, true
	}
	return b
}

// HostCPUs is the number of the host's logical processors in every
// processor group, or runtime.NumCPU when that count fails.
func (b *Backend) HostCPUs() int {
	if n := b.host.activeProcessors(); n > 0 {
		return int(n)
	}
	return runtime.NumCPU()
}

// jobName is the name of container id's job object. runhcs names its own
// JobContainer_<id>; winproc's differ, so that the two runtimes on one
// node never take each other's.
func jobName(id string) string { return "winproc-hostprocess-" + id }

// held is what a container holds beyond its job object, recorded for
// Open: its scratch layer and mount point, the bindings of its mapped
// directories, and the temporary users made for its processes.
type held struct {
	ID         string   `json:"id"`
	Scratch    string   `json:"scratch,omitempty"`
	MountPoint string   `json:"mountPoint,omitempty"`
	Bindings   []string `json:"bindings,omitempty"`
	Users      []string `json:"users,omitempty"`
	// Shim is the shim that created the container: its job object dies
	// with that shim's last handle, and what is recorded here is an
	// orphan's once the shim is gone (orphans.go).
	Shim record.Shim `json:"shim"`
	// refused is why the record read is not acted on (checkHeld): what
	// it names is left alone, and so is the record.
	refused error
}

// Create makes HostProcess container id, without starting it; on failure
// everything done is undone in reverse order:
//
//  1. refuse what a HostProcess container cannot have (checkSettings);
//  2. the job object (an existing one of the name is ErrAlreadyExists),
//     killed when its last handle closes, with its limits, and a
//     completion port for its messages;
//  3. what a container of the id that died with its shim left behind is
//     released, and the record written;
//  4. the rootfs at <MountRoot>\<id> (the scratch activated and prepared
//     over its parents, its volume bound or mounted there);
//  5. each mapped directory under the mount point: a binding with the
//     bind filter, a symbolic link without.
func (b *Backend) Create(ctx context.Context, id string, s *compute.Settings) (compute.System, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := record.CheckID(id); err != nil {
		return nil, err
	}
	mountPoint := hostprocess.Join(b.mountRoot, id)
	links, err := checkSettings(s, mountPoint)
	if err != nil {
		return nil, fmt.Errorf("HostProcess container %s: %w", id, err)
	}
	job, port, err := b.createJob(id, limitsOf(s.Resources, b.HostCPUs()))
	if err != nil {
		return nil, fmt.Errorf("HostProcess container %s: %w", id, err)
	}
	undoJob := func() {
		b.closeHandle(ctx, port)
		b.closeHandle(ctx, job)
	}
	b.releaseStale(ctx, id)
	h := held{ID: id, Scratch: s.Layers.Scratch, MountPoint: mountPoint, Shim: record.Self()}
	if b.binds {
		h.Bindings = links
	}
	if err := b.records.Write(id, h); err != nil {
		undoJob()
		return nil, err
	}
	err = b.rootfs.mount(ctx, s.Layers, s.SandboxSizeBytes, mountPoint)
	if err != nil {
		b.removeRecord(ctx, id)
	} else if err = b.mapDirectories(s.MappedDirectories, links); err != nil {
		b.releaseHeld(ctx, h)
	}
	if err != nil {
		undoJob()
		return nil, fmt.Errorf("HostProcess container %s: %w", id, err)
	}
	return newSystem(b, id, job, port, h, s.HostProcess.InheritUser), nil
}

// createJob makes the job object of id with its limits and its completion
// port.
func (b *Backend) createJob(id string, l jobLimits) (job, port handle, err error) {
	job, err = b.host.createJobObject(jobName(id))
	if err != nil {
		return 0, 0, classify(fmt.Sprintf("create job object %s", jobName(id)), err, b.host.facts(err))
	}
	if err = b.applyLimits(job, l, false); err == nil {
		if port, err = b.host.createCompletionPort(); err != nil {
			err = classify("create the job's completion port", err, b.host.facts(err))
		} else if err = b.host.associateCompletionPort(job, port, jobKey); err != nil {
			err = classify("associate the job with its completion port", err, b.host.facts(err))
		}
	}
	if err != nil {
		b.closeHandle(context.Background(), port)
		b.closeHandle(context.Background(), job)
		return 0, 0, err
	}
	return job, port, nil
}

// Completion keys: the job's messages, and the system's own message that
// ends its watch.
const (
	jobKey  uintptr = 1
	quitKey uintptr = 2
)

func (b *Backend) closeHandle(ctx context.Context, h handle) {
	if h == 0 {
		return
	}
	if err := b.host.closeHandle(h); err != nil {
		log.G(ctx).WithError(err).Warn("close a handle")
	}
}

// checkSettings refuses settings that are not a HostProcess container's,
// or that it cannot have, and returns where each mapped directory goes:
// its container path under the mount point, the drive letter dropped
// (runhcs's fallback without the bind filter).
func checkSettings(s *compute.Settings, mountPoint string) ([]string, error) {
	const why = "a HostProcess container's processes run on the host"
	switch {
	case s == nil || s.HostProcess == nil:
		return nil, invalid("not a HostProcess container (Settings.HostProcess is not set): this backend runs HostProcess containers only; process-isolated containers run on the HCS backend")
	case s.Layers.Scratch == "":
		return nil, invalid("no scratch layer: a HostProcess container's rootfs is its scratch over its image's layers")
	case len(s.MappedPipes) > 0:
		return nil, invalid("named pipe %s is mapped: %s and open host pipes directly; remove the mount", s.MappedPipes[0].HostPath, why)
	case s.Network.Namespace != "" || len(s.Network.Endpoints) > 0 || s.Network.SharedContainerName != "":
		return nil, invalid("a network namespace or endpoints are set: %s in the host's network; remove them", why)
	case s.CredentialSpec != "":
		return nil, invalid("a gMSA credential spec is set: %s as host accounts; remove it", why)
	case len(s.AssignedDevices) > 0:
		return nil, invalid("devices are assigned: %s, where the host's devices are theirs already; remove them", why)
	case s.ProcessDumps != nil:
		return nil, invalid("process dump settings are set: %s under Windows Error Reporting's own settings; remove them", why)
	case s.Resources.StorageIOPSMaximum != 0 || s.Resources.StorageBandwidthMaximum != 0:
		return nil, invalid("storage limits are set: %s on the host's disks, which a job object does not limit; remove them", why)
	}
	links := make([]string, len(s.MappedDirectories))
	for i, d := range s.MappedDirectories {
		rel := d.ContainerPath
		if len(rel) >= 2 && rel[1] == ':' {
			rel = rel[2:]
		}
		if strings.Trim(rel, `\/`) == "" {
			return nil, invalid("mount %s → %s maps a whole drive: a HostProcess container's mount is placed under its mount point, which holds its rootfs; map a directory", d.HostPath, d.ContainerPath)
		}
		links[i] = hostprocess.Join(mountPoint, strings.ReplaceAll(rel, "/", `\`))
		if !record.UnderWindowsRoot(mountPoint, links[i]) {
			// The record of such a place would be refused (checkHeld).
			return nil, invalid("mount %s → %s leads out of the container's mount point (a \".\" or \"..\" component): map a directory under it", d.HostPath, d.ContainerPath)
		}
	}
	return links, nil
}

// mapDirectories makes each mapped directory a binding (bindDirectories)
// or a symbolic link at its place under the mount point, replacing a link
// left there by an earlier run.
func (b *Backend) mapDirectories(dirs []compute.MappedDirectory, links []string) error {
	if b.binds {
		return b.bindDirectories(dirs, links)
	}
	for i, d := range dirs {
		link := links[i]
		if err := b.host.mkdirAll(link[:strings.LastIndex(link, `\`)]); err != nil {
			return classify(fmt.Sprintf("mount %s → %s: make the directory of %s", d.HostPath, d.ContainerPath, link), err, b.host.facts(err))
		}
		if b.host.isLink(link) {
			if err := b.host.remove(link); err != nil {
				return classify(fmt.Sprintf("mount %s → %s: remove the old link %s", d.HostPath, d.ContainerPath, link), err, b.host.facts(err))
			}
		}
		if err := b.host.symlink(d.HostPath, link); err != nil {
			return classify(fmt.Sprintf("mount %s → %s: link %s to it", d.HostPath, d.ContainerPath, link), err, b.host.facts(err))
		}
	}
	return nil
}

// releaseHeld releases what h names: the bindings of mapped directories,
// the rootfs (once no binding is left under it), then the temporary
// users. The record is removed once nothing is held, and rewritten with
// what is still held otherwise. Failures are logged.
func (b *Backend) releaseHeld(ctx context.Context, h held) {
	if err := b.release(ctx, h); err != nil {
		log.G(ctx).WithError(err).WithField("id", h.ID).Warn("release what a HostProcess container held")
	}
}

func (b *Backend) release(ctx context.Context, h held) error {
	if h.refused != nil {
		return h.refused
	}
	left, err := b.unbindAll(h.Bindings)
	errs := []error{err}
	h.Bindings = left
	if h.Scratch != "" && len(left) == 0 {
		released, err := b.rootfs.unmount(ctx, h.Scratch, h.MountPoint)
		if err != nil && record.BootedSince(h.Shim) {
			// The scratch's activation ended with the boot its shim ran
			// in: the layer functions refuse to release what is no
			// longer held.
			log.G(ctx).WithError(err).WithField("id", h.ID).Info("the node booted since the scratch was mounted: it is released")
			released, err = true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
		if released {
			h.Scratch, h.MountPoint = "", ""
		}
	}
	var users []string
	for _, u := range h.Users {
		if err := b.host.deleteUser(u); err != nil && !b.host.facts(err).NotExist {
			errs = append(errs, classify(fmt.Sprintf("delete the temporary user %s", u), err, b.host.facts(err)))
			users = append(users, u)
		}
	}
	h.Users = users
	if h.Scratch == "" && len(h.Bindings) == 0 && len(h.Users) == 0 {
		err = b.records.Remove(h.ID)
	} else {
		err = b.records.Write(h.ID, h)
	}
	return errors.Join(append(errs, err)...)
}

// releaseStale releases what the record of id names, for a container that
// no longer exists (its shim died, and no delete cleaned up). Failures are
// logged.
func (b *Backend) releaseStale(ctx context.Context, id string) {
	h, ok := b.readHeld(ctx, id)
	if !ok {
		return
	}
	log.G(ctx).WithFields(log.Fields{"id": id, "scratch": h.Scratch, "users": h.Users}).Info("releasing what a HostProcess container that no longer exists held")
	b.releaseHeld(ctx, h)
}

// readHeld reads the record of id; an unreadable one is logged and
// ignored. One that names what this backend does not make (checkHeld) is
// logged and read as holding nothing, with why it is refused.
func (b *Backend) readHeld(ctx context.Context, id string) (held, bool) {
	var h held
	ok, err := b.records.Read(id, &h)
	if err == nil && ok && h.ID != id {
		err = fmt.Errorf("record %s is for %q, not for %s", b.records.Path(id), h.ID, id)
	}
	if err != nil {
		log.G(ctx).WithError(err).Warn("ignore an unreadable record; what it names will not be released")
		return held{}, false
	}
	if !ok {
		return h, false
	}
	if err := b.checkHeld(h); err != nil {
		log.G(ctx).WithError(err).Error("refuse a record")
		return held{ID: id, Shim: h.Shim, refused: err}, true
	}
	return h, true
}

func (b *Backend) removeRecord(ctx context.Context, id string) {
	if err := b.records.Remove(id); err != nil {
		log.G(ctx).WithError(err).Warn("remove record")
	}
}

// Open attaches to container id's job object, for the shim's delete
// subcommand. A job whose last handle closed is gone with every process
// in it (the serving shim held the only one): Open then releases what the
// record names, the rootfs mount and the temporary users, since nothing
// else will, and says errdefs.ErrNotFound. Otherwise what the record
// names is released by Close once the job has no processes left.
func (b *Backend) Open(ctx context.Context, id string) (compute.System, error) {
	if err := record.CheckID(id); err != nil {
		return nil, err
	}
	job, err := b.host.openJobObject(jobName(id))
	if err != nil {
		f := b.host.facts(err)
		if f.NotExist {
			b.releaseStale(ctx, id)
			return nil, fmt.Errorf("HostProcess container %s: its job object %s is gone, with its processes: %w", id, jobName(id), errdefs.ErrNotFound)
		}
		return nil, classify(fmt.Sprintf("open the job object %s of HostProcess container %s", jobName(id), id), err, f)
	}
	h, ok := b.readHeld(ctx, id)
	if !ok {
		log.G(ctx).WithField("id", id).Info("no record: closing this container will not release its rootfs mount")
		h = held{ID: id}
	}
	return newSystem(b, id, job, 0, h, false), nil
}

// volumeRootfs is the rootfs as runhcs mounts it without the bind filter:
// the scratch's volume (shim/scratch) at a volume mount point
// (hcsshim internal/layers MountSandboxVolume, RemoveSandboxMountPoint).
type volumeRootfs struct{ b *Backend }

func (v volumeRootfs) mount(ctx context.Context, l compute.Layers, size uint64, dir string) error {
	h := v.b.host
	return v.b.mountScratch(ctx, l, size, func(volume string) error {
		if err := h.mkdirAll(dir); err != nil {
			return classify(fmt.Sprintf("make the mount point %s", dir), err, h.facts(err))
		}
		if err := h.setVolumeMountPoint(dir+`\`, volume); err != nil {
			if rerr := h.remove(dir); rerr != nil {
				log.G(ctx).WithError(rerr).Warn("remove the mount point after a failure")
			}
			return classify(fmt.Sprintf("mount the scratch's volume %s at %s", volume, dir), err, h.facts(err))
		}
		return nil
	})
}

// mountScratch grows the scratch to size bytes (when not 0), mounts it
// over its parents as a volume (shim/scratch), and hands the volume to
// place; when place fails, the scratch is released again.
func (b *Backend) mountScratch(ctx context.Context, l compute.Layers, size uint64, place func(volume string) error) error {
	h := b.host
	if size > 0 {
		if err := h.Expand(l.Scratch, size); err != nil {
			return classify(fmt.Sprintf("expand the scratch layer %s to %d bytes", l.Scratch, size), err, h.facts(err))
		}
	}
	volume, err := b.scratch.Mount(ctx, l.Scratch, l.Parents)
	if err != nil {
		return err
	}
	if err := place(volume); err != nil {
		if rerr := b.scratch.Release(l.Scratch); rerr != nil {
			log.G(ctx).WithError(rerr).Warn("release the scratch layer after a failure")
		}
		return err
	}
	return nil
}

// unmount removes the volume mount point (one already gone is no error)
// and its directory, then releases the scratch. While the mount point
// stays, the scratch does too: its volume would be left mounted.
func (v volumeRootfs) unmount(ctx context.Context, scratchDir, dir string) (bool, error) {
	h := v.b.host
	if err := h.deleteVolumeMountPoint(dir + `\`); err != nil && !h.facts(err).NotExist && !errors.Is(err, errorNotAReparsePoint) {
		return false, classify(fmt.Sprintf("remove the volume mount point %s", dir), err, h.facts(err))
	}
	if err := h.remove(dir); err != nil && !h.facts(err).NotExist {
		log.G(ctx).WithError(err).WithField("dir", dir).Warn("remove the mount point's directory")
	}
	err := v.b.scratch.Release(scratchDir)
	return !scratch.StillActive(err), err
}
