//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/internal/winetemplate"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// DefaultRoot is a suggested Config.Root: under /run, so that the systems'
// directories go with their mounts at a reboot.
const DefaultRoot = "/run/winproc/emulation"

// Config configures a Backend.
type Config struct {
	// Root holds one directory per compute system, Root/<id>. It is
	// created when missing.
	Root string
	// TemplatePrefix is the Wine prefix every system's own prefix overlays
	// (made once, by `make wine`; it needs the ProcessPrng stub in
	// windows/system32 for Go programs). Its drive_c stands in for the host
	// OS files below the image layers. It is needed by Create only: a
	// Backend without it (the shim's delete subcommand, which has no
	// runtime options) can Open and Remove systems. `make wine` also puts
	// the exit library there (winetemplate.ExitLibrary).
	TemplatePrefix string
}

// Backend is the Wine emulation of compute.Backend, for tests and
// development on Linux. See the package documentation.
type Backend struct {
	root       string
	template   string
	wine       string
	wineserver string
	// setarch starts Wine processes without address space randomization
	// (see doc.go, Processes).
	setarch string
	// exitLib is the template's winetemplate.ExitLibrary, "" if it has
	// none.
	exitLib string
	// createErr, when set, is why this Backend cannot create systems
	// (no template prefix, Wine missing).
	createErr error
	reaper    *reaper
	// cgroups is where silos' cgroups are made, nil where the machine
	// offers no writable cgroup v2 hierarchy.
	cgroups *cgroupTree
	// carry holds the teardowns carried on in the background.
	carry carrier
}

var (
	_ compute.Backend = (*Backend)(nil)
	_ compute.Drainer = (*Backend)(nil)
)

// New returns a Backend keeping its systems under cfg.Root. It makes the
// calling process a child subreaper (PR_SET_CHILD_SUBREAPER): orphaned Wine
// processes of its systems are re-parented to it and reaped by the backend
// (see reaper_linux.go; the reaper is shared by all Backends of the
// process).
func New(cfg Config) (*Backend, error) {
	if cfg.Root == "" {
		return nil, errInvalid("emulation: Config.Root is empty")
	}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return nil, fmt.Errorf("emulation: %w", err)
	}
	root, err := cleanPath(cfg.Root)
	if err != nil {
		return nil, err
	}
	b := &Backend{root: root}
	if cfg.TemplatePrefix == "" {
		b.createErr = errInvalid("emulation: no Wine template prefix: set the shim option wine_template_prefix to a prefix made by `make wine`")
	} else {
		if b.template, err = cleanPath(cfg.TemplatePrefix); err != nil {
			return nil, err
		}
		for _, p := range []string{"system.reg", "drive_c"} {
			if _, err := os.Stat(filepath.Join(b.template, p)); err != nil {
				return nil, errInvalid("emulation: template prefix %s is not a Wine prefix (no %s; make one with `make wine`)", b.template, p)
			}
		}
		if b.exitLib = winetemplate.ExitLibraryIn(b.template); b.exitLib == "" {
			log.L.WithField("template", b.template).Warnf("emulation: the template has no %s (`make wine` builds it): now and then a process's exit hangs and the wineserver kills it, and exit codes keep only their low 8 bits", winetemplate.ExitLibrary)
		}
	}
	if b.wine, err = exec.LookPath("wine"); err != nil && b.createErr == nil {
		b.createErr = fmt.Errorf("emulation: Wine is not installed (apt-get install wine wine64): %w", err)
	}
	if b.setarch, err = exec.LookPath("setarch"); err != nil && b.createErr == nil {
		b.createErr = fmt.Errorf("emulation: setarch is not installed (apt-get install util-linux): %w", err)
	}
	if b.wineserver, err = exec.LookPath("wineserver"); err != nil && b.createErr == nil {
		b.createErr = fmt.Errorf("emulation: wineserver is not installed (apt-get install wine wine64): %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("emulation: become a child subreaper: %w", err)
	}
	b.reaper = processReaper()
	b.reaper.addRoot(root)
	if t, err := siloCgroups(); err != nil {
		log.L.WithError(err).Warn("emulation: no cgroup for silos: their processes are found by WINEPREFIX, and orphans by polling")
	} else {
		b.cgroups = t
		b.reaper.useCgroups(t)
	}
	return b, nil
}

// HostCPUs is the number of processors this process may run on.
func (b *Backend) HostCPUs() int { return runtime.NumCPU() }

// validID matches the ids the backend takes: one path component, the
// characters containerd allows; dir caps the length at 255. (A bounded
// repetition would compile to 254 copies, a quarter of a megabyte held by
// every shim.)
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func (b *Backend) dir(id string) (string, error) {
	if len(id) > 255 || !validID.MatchString(id) {
		return "", errInvalid("emulation: invalid system id %q", id)
	}
	return filepath.Join(b.root, id), nil
}

func (b *Backend) register(s *system) { b.reaper.acquire(s) }

func (b *Backend) forget(s *system) { b.reaper.release(s) }

// checkSettings refuses what the emulation cannot do at all. The layer
// stack was checked by the translation (specconv); what the emulation
// needs of the layer directories themselves, driveC checks.
func checkSettings(ctx context.Context, s *compute.Settings) error {
	if len(s.MappedPipes) > 0 {
		return errNotSupported("emulation: mapped named pipes (%s): Wine's named pipes do not reach the host's", s.MappedPipes[0].HostPath)
	}
	if len(s.AssignedDevices) > 0 {
		return errNotSupported("emulation: assigned devices (%s)", s.AssignedDevices[0].ID)
	}
	if s.CredentialSpec != "" {
		return errNotSupported("emulation: gMSA credential specs")
	}
	// Mapped directories: only on C:, and the host side must exist.
	for _, m := range s.MappedDirectories {
		comps, err := cPath(m.ContainerPath)
		if err != nil {
			return fmt.Errorf("emulation: mapped directory %s: %w", m.HostPath, err)
		}
		if len(comps) == 0 {
			return errNotSupported("emulation: mapped directory %s onto the whole C: drive", m.HostPath)
		}
		if !filepath.IsAbs(m.HostPath) {
			return errInvalid("emulation: mapped directory %q: the host path must be absolute", m.HostPath)
		}
	}
	if isNetNSPath(s.Network.Namespace) && s.HostProcess == nil {
		if _, err := os.Stat(s.Network.Namespace); err != nil {
			return errInvalid("emulation: network namespace: %v", err)
		}
	}
	var ignored []string
	if u := unenforced(s.Resources, v1Hierarchies()); len(u) > 0 {
		ignored = append(ignored, strings.Join(u, ", ")+" (recorded, not enforced)")
	}
	if s.HostName != "" {
		ignored = append(ignored, "hostname (Wine uses the host's)")
	}
	switch {
	case s.HostProcess != nil && !reflect.DeepEqual(s.Network, compute.Network{}):
		ignored = append(ignored, "network settings (a HostProcess container uses the host's network)")
	case s.HostProcess == nil && (s.Network.Namespace != "" && !isNetNSPath(s.Network.Namespace) || len(s.Network.Endpoints) > 0 || len(s.Network.DNSSearchList) > 0):
		ignored = append(ignored, "network other than a Linux network namespace (Wine uses that namespace's network stack)")
	}
	if s.SandboxSizeBytes != 0 {
		ignored = append(ignored, "sandbox size (a directory has no size)")
	}
	if s.ProcessDumps != nil {
		ignored = append(ignored, "process dumps (Wine has no Windows Error Reporting)")
	}
	if len(ignored) > 0 {
		log.G(ctx).Warnf("emulation: ignoring %s", strings.Join(ignored, ", "))
	}
	return nil
}

// overlay is the directories of an overlay mount.
type overlay struct {
	lowers      []string
	upper, work string
}

// layersOverlay is the overlay of a container's layers: the parents'
// Files directories, nearest first, with the scratch's upper and work
// directories. They must be there: the overlay would refuse them too, less
// clearly.
func layersOverlay(l compute.Layers) (overlay, error) {
	o := overlay{
		upper: filepath.Join(l.Scratch, layermount.ScratchUpper),
		work:  filepath.Join(l.Scratch, layermount.ScratchWork),
	}
	for _, d := range []string{o.upper, o.work} {
		if err := isDir(d); err != nil {
			return overlay{}, fmt.Errorf("emulation: scratch layer: %w", err)
		}
	}
	o.lowers = make([]string, 0, len(l.Parents)+1)
	for _, p := range l.Parents {
		f := filepath.Join(p, layermount.FilesDir)
		if err := isDir(f); err != nil {
			return overlay{}, fmt.Errorf("emulation: parent layer: %w", err)
		}
		o.lowers = append(o.lowers, f)
	}
	return o, nil
}

// driveC is the overlay of a silo's drive C:: its layers over the
// template's drive_c, which stands in for the host OS files.
func (b *Backend) driveC(l compute.Layers) (overlay, error) {
	o, err := layersOverlay(l)
	if err != nil {
		return overlay{}, err
	}
	o.lowers = append(o.lowers, filepath.Join(b.template, "drive_c"))
	return o, nil
}

// Create creates the system: its directory Root/<id>, the prefix overlay,
// the C: overlay, the dosdevices link and the mapped directories, recorded
// in state.json; for a HostProcess container, its rootfs and mapped
// directories at its mount point in the host prefix (mountHostProcess). On
// failure everything made so far is undone.
func (b *Backend) Create(ctx context.Context, id string, s *compute.Settings) (_ compute.System, retErr error) {
	dir, err := b.dir(id)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errInvalid("emulation: no settings")
	}
	if b.createErr != nil {
		return nil, b.createErr
	}
	if err := checkSettings(ctx, s); err != nil {
		return nil, err
	}
	if s.HostProcess != nil && b.cgroups == nil {
		return nil, errNotSupported("emulation: HostProcess containers need a writable cgroup v2 hierarchy: they share the host prefix, and only their cgroups tell their processes apart")
	}
	var drive overlay
	if s.HostProcess != nil {
		drive, err = layersOverlay(s.Layers)
	} else {
		drive, err = b.driveC(s.Layers)
	}
	if err != nil {
		return nil, err
	}

	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("emulation: system %s: %w", id, errdefs.ErrAlreadyExists)
		}
		return nil, fmt.Errorf("emulation: %w", err)
	}
	st := &persisted{
		Version:        stateVersion,
		ID:             id,
		TemplatePrefix: b.template,
		Layers:         s.Layers,
		Mapped:         s.MappedDirectories,
		Resources:      s.Resources,
		ShimPID:        os.Getpid(),
	}
	if self, err := readStat(st.ShimPID); err == nil {
		st.ShimStart = self.start
	}
	if s.HostProcess != nil {
		st.HostProcess = &hostProcessState{MountPoint: b.hostMountPoint(id), InheritUser: s.HostProcess.InheritUser}
	} else if isNetNSPath(s.Network.Namespace) {
		st.NetNS = s.Network.Namespace
	}
	defer func() {
		if retErr != nil {
			if err := b.removeSystem(context.Background(), dir, st); err != nil {
				retErr = fmt.Errorf("%w (and rolling back: %v)", retErr, err)
			}
		}
	}()
	if err := b.makeCgroups(dir, st); err != nil {
		return nil, fmt.Errorf("emulation: system %s: %w", id, err)
	}
	if err := saveState(dir, st); err != nil {
		return nil, err
	}
	if st.HostProcess != nil {
		err = b.mountHostProcess(ctx, dir, st, drive)
	} else {
		err = b.mountSilo(ctx, dir, st, drive)
	}
	if err != nil {
		return nil, err
	}
	sys := newSystem(b, id, dir, st, false)
	b.register(sys)
	return sys, nil
}

// makeCgroups makes the silo's cgroup, where the machine has one for
// silos, and the cgroups enforcing its limits, recording them in st.
func (b *Backend) makeCgroups(dir string, st *persisted) error {
	if b.cgroups != nil {
		st.Cgroup = b.cgroups.siloOf(dir)
		if err := makeCgroup(st.Cgroup); err != nil {
			return err
		}
	}
	if !resourcesSet(st.Resources) {
		return nil
	}
	var err error
	if st.LimitCgroups, err = makeLimitCgroups(dir); err != nil {
		return err
	}
	return applyLimits(st.Resources, st.LimitCgroups, b.HostCPUs())
}

// mountSilo mounts the system's prefix and drive C:, points the prefix's
// c: at the drive and binds the mapped directories onto it, recording
// every mount in state.json as it is made, so a teardown finds them.
func (b *Backend) mountSilo(ctx context.Context, dir string, st *persisted, drive overlay) error {
	for _, d := range []string{prefixUpper, prefixWork, prefixDir, cDir} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return fmt.Errorf("emulation: %w", err)
		}
	}
	prefix, cdir := filepath.Join(dir, prefixDir), filepath.Join(dir, cDir)
	mounted := func(mp string) error {
		st.Mounts = append(st.Mounts, mp)
		return saveState(dir, st)
	}

	if err := ctx.Err(); err != nil {
		return err
	}
	if err := mountOverlay(prefix, []string{b.template}, filepath.Join(dir, prefixUpper), filepath.Join(dir, prefixWork)); err != nil {
		return fmt.Errorf("emulation: prefix: %w", err)
	}
	if err := mounted(prefix); err != nil {
		return err
	}
	if err := mountOverlay(cdir, drive.lowers, drive.upper, drive.work); err != nil {
		return fmt.Errorf("emulation: drive C: %w", err)
	}
	if err := mounted(cdir); err != nil {
		return err
	}
	// The prefix's c: is the layers' union, not the template's drive_c.
	link := filepath.Join(prefix, "dosdevices", "c:")
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("emulation: %w", err)
	}
	if err := os.Symlink(filepath.Join("..", "..", cDir), link); err != nil {
		return fmt.Errorf("emulation: %w", err)
	}

	return bindMapped(ctx, cdir, st.Mapped, mounted)
}

// bindMapped binds each mapped directory (or file) onto its place below
// root, the container's C: (a silo's drive, or a HostProcess container's
// mount point), creating the mount point there, and calls mounted with
// each mount made.
func bindMapped(ctx context.Context, root string, mapped []compute.MappedDirectory, mounted func(string) error) error {
	for _, m := range mapped {
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := os.Stat(m.HostPath)
		if err != nil {
			return fmt.Errorf("emulation: mapped directory: %w", err)
		}
		comps, _ := cPath(m.ContainerPath)
		target, err := mkdirFold(root, comps, !fi.IsDir())
		if err != nil {
			return fmt.Errorf("emulation: mapped directory %s: %w", m.ContainerPath, err)
		}
		if err := bindMount(m.HostPath, target, m.ReadOnly); err != nil {
			return fmt.Errorf("emulation: mapped directory %s: %w", m.ContainerPath, err)
		}
		if err := mounted(target); err != nil {
			return err
		}
	}
	return nil
}

// Open attaches to the system id made by this or an earlier process: the
// shim's delete subcommand uses it after the shim that created the system
// died. The system is running when any of its processes is (its Wait then
// closes once they are all gone); Terminate and Close tear it down. A
// directory without a readable state.json (a creation that died halfway)
// still opens, as a stopped system that Close removes.
func (b *Backend) Open(ctx context.Context, id string) (compute.System, error) {
	dir, err := b.dir(id)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("emulation: system %s: %w", id, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("emulation: %w", err)
	}
	st, err := loadState(dir)
	if err != nil {
		log.G(ctx).WithError(err).Warnf("emulation: system %s has no usable state; opening it for cleanup only", id)
		st = b.recoverState(id, dir)
	}
	sys := newSystem(b, id, dir, st, true)
	procs, err := sys.processes()
	if err != nil {
		return nil, err
	}
	b.register(sys)
	if len(procs) == 0 {
		sys.finish(fmt.Errorf("emulation: system %s was not running when opened", id))
		return sys, nil
	}
	sys.mu.Lock()
	sys.phase, sys.ran = phaseRunning, true
	if st.Started != nil {
		sys.started = *st.Started
	}
	sys.startMonitor(nil)
	sys.mu.Unlock()
	return sys, nil
}

// resourcesSet reports whether r sets any limit.
func resourcesSet(r compute.Resources) bool {
	affinity := len(r.CPUAffinity) > 0
	r.CPUAffinity = nil
	return affinity || !reflect.DeepEqual(r, compute.Resources{})
}

func isDir(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", p)
	}
	return nil
}
