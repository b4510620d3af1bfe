package specconv

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/Microsoft/hcsshim/pkg/annotations"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/internal/validation"
	"github.com/winproc/winproc/internal/wincmdline"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/winpath"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// invalid is an errdefs.ErrInvalidArgument error.
func invalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}

// FromSpec translates a container's OCI spec and its rootfs mounts into the
// settings of its compute system and of its init process. hostCPUs is the
// host's processor count (Backend.HostCPUs). Anything winproc cannot honour
// is an error wrapping errdefs.ErrInvalidArgument that names the spec field
// and the fix.
func FromSpec(spec *specs.Spec, rootfs []mount.Mount, hostCPUs int) (*compute.Settings, *compute.ProcessSettings, error) {
	if spec == nil {
		return nil, nil, invalid("the OCI spec is missing")
	}
	w := spec.Windows
	if w == nil {
		return nil, nil, invalid("not a Windows spec: spec.windows is missing; winproc runs Windows containers only, so create the container from a Windows image with a Windows spec")
	}
	if w.HyperV != nil {
		return nil, nil, invalid("spec.windows.hyperv is set, but winproc runs process-isolated containers only: remove the hyperv section or use runhcs (io.containerd.runhcs.v1) for Hyper-V isolation")
	}
	if err := checkSpecFields(spec); err != nil {
		return nil, nil, err
	}
	var s compute.Settings
	var err error
	if s.Layers, err = layersFrom(rootfs, w.LayerFolders); err != nil {
		return nil, nil, err
	}
	if s.MappedDirectories, s.MappedPipes, err = mountsFrom(spec.Mounts); err != nil {
		return nil, nil, err
	}
	resources, gmsaDisabled, err := applyAnnotations(spec.Annotations, w.Resources)
	if err != nil {
		return nil, nil, err
	}
	if s.ProcessDumps, err = processDumpsFrom(spec.Annotations); err != nil {
		return nil, nil, err
	}
	field := "spec.windows.resources"
	if resources != w.Resources {
		field += " (with its io.microsoft.container.* annotations)"
	}
	if s.Resources, err = resourcesFrom(resources, hostCPUs, field); err != nil {
		return nil, nil, err
	}
	if w.Resources != nil && w.Resources.Storage != nil && w.Resources.Storage.SandboxSize != nil {
		s.SandboxSizeBytes = *w.Resources.Storage.SandboxSize
	}
	s.HostName = spec.Hostname
	if s.Network, err = networkFrom(w.Network); err != nil {
		return nil, nil, err
	}
	if s.CredentialSpec, err = credentialSpec(w.CredentialSpec); err != nil {
		return nil, nil, err
	}
	if s.CredentialSpec != "" && gmsaDisabled {
		return nil, nil, fmt.Errorf("spec.windows.credentialSpec: gMSA credentials are disabled on this container by annotation %s or %s: remove the pod's gMSA credential spec or the annotation: %w",
			annotations.WCOWDisableGMSA, annotations.DisableUnsafeOperations, errdefs.ErrFailedPrecondition)
	}
	if s.AssignedDevices, err = devicesFrom(w.Devices); err != nil {
		return nil, nil, err
	}

	if spec.Process == nil {
		return nil, nil, invalid("spec.process is missing: a container needs the process to run (args or commandLine)")
	}
	p, err := processFrom(spec.Process, "spec.process")
	if err != nil {
		return nil, nil, err
	}
	if IsHostProcess(spec) {
		if err := hostProcessFrom(spec, &s, p); err != nil {
			return nil, nil, err
		}
	}
	return &s, p, nil
}

// ProcessFromSpec translates the process of an exec into its settings,
// with the same rules as the init process in FromSpec.
func ProcessFromSpec(p *specs.Process) (*compute.ProcessSettings, error) {
	if p == nil {
		return nil, invalid("the process spec is missing")
	}
	return processFrom(p, "process")
}

// ResourcesFromSpec translates the resources of a task update (containerd
// passes a *specs.WindowsResources) for System.Modify, with the same rules
// and capping as FromSpec.
func ResourcesFromSpec(r *specs.WindowsResources, hostCPUs int) (compute.Resources, error) {
	if r != nil && r.Storage != nil && r.Storage.SandboxSize != nil {
		return compute.Resources{}, invalid("resources.storage.sandboxSize cannot change on a running container: the system drive's size is set when the container is created; remove it from the update")
	}
	return resourcesFrom(r, hostCPUs, "resources")
}

// checkSpecFields refuses the spec-level fields that have no meaning for a
// process-isolated Windows container.
func checkSpecFields(spec *specs.Spec) error {
	switch {
	case spec.Linux != nil:
		return invalid("spec.linux is set: a Windows container has no Linux section; remove it (Linux containers on Windows need runhcs)")
	case spec.Solaris != nil:
		return invalid("spec.solaris is set: remove it, a Windows container has no Solaris section")
	case spec.VM != nil:
		return invalid("spec.vm is set: winproc runs process-isolated containers, not virtual machines; remove it")
	case spec.ZOS != nil:
		return invalid("spec.zos is set: remove it, a Windows container has no z/OS section")
	case spec.FreeBSD != nil:
		return invalid("spec.freebsd is set: remove it, a Windows container has no FreeBSD section")
	case spec.Domainname != "":
		return invalid("spec.domainname is set: Windows containers have no domain name setting; remove it (a gMSA credential spec joins a container to a domain)")
	case spec.Hooks != nil && hasHooks(spec.Hooks):
		return invalid("spec.hooks are set: winproc does not run OCI hooks; remove them")
	case spec.Windows.Servicing:
		return invalid("spec.windows.servicing is set: winproc does not run Windows Update servicing containers; remove it")
	}
	if r := spec.Root; r != nil {
		if r.Readonly {
			return invalid("spec.root.readonly is set: a Windows container's system drive cannot be read-only; remove it (mount data read-only with the ro option instead)")
		}
		if r.Path != "" {
			return invalid("spec.root.path is %q: winproc builds the root filesystem from the rootfs mount or spec.windows.layerFolders and cannot use a pre-mounted volume; leave root.path empty", r.Path)
		}
	}
	return nil
}

func hasHooks(h *specs.Hooks) bool {
	//nolint:staticcheck // Prestart is deprecated, but a spec may still carry it.
	return len(h.Prestart) > 0 || len(h.CreateRuntime) > 0 || len(h.CreateContainer) > 0 ||
		len(h.StartContainer) > 0 || len(h.Poststart) > 0 || len(h.Poststop) > 0
}

// layersFrom takes the layer stack from the single windows-layer rootfs
// mount or from the spec's layer folders (parents nearest first, scratch
// last), whichever is given.
func layersFrom(rootfs []mount.Mount, folders []string) (compute.Layers, error) {
	var l compute.Layers
	switch {
	case len(rootfs) > 0 && len(folders) > 0:
		return compute.Layers{}, invalid("both a rootfs mount and spec.windows.layerFolders are given: pass only one (with a snapshotter, containerd passes the rootfs mount; leave layerFolders empty)")
	case len(rootfs) == 0 && len(folders) == 0:
		return compute.Layers{}, invalid("the container has no layers: neither a rootfs mount nor spec.windows.layerFolders is given; create the container with a snapshot of a Windows image")
	case len(rootfs) > 0:
		if len(rootfs) > 1 {
			return compute.Layers{}, invalid("the rootfs is %d mounts: a Windows rootfs is one %s mount", len(rootfs), layermount.Type)
		}
		m := rootfs[0]
		if m.Type != layermount.Type {
			return compute.Layers{}, invalid("the rootfs mount has type %q: winproc takes one %s mount from a windowsfilter snapshotter (winproc's, or containerd's windows snapshotter; CimFS layers are not supported)", m.Type, layermount.Type)
		}
		if m.Target != "" {
			return compute.Layers{}, invalid("the rootfs mount has target %q: a Windows rootfs is mounted as a whole; leave target empty", m.Target)
		}
		decoded, err := layermount.Decode(rootfs)
		if err != nil {
			return compute.Layers{}, fmt.Errorf("rootfs: %w", err)
		}
		// A view's mount ("ro") has a scratch too, as containerd's
		// windows snapshotter makes one: it runs like an active snapshot
		// (hcsshim's ParseWCOWLayers ignores "ro" as well), and what the
		// container writes goes when the view is removed.
		if len(decoded.Parents) == 0 {
			return compute.Layers{}, invalid("the rootfs mount of %s has no parent layers (parentLayerPaths): a container needs its image's layers, at least the base layer", decoded.Path)
		}
		l = compute.Layers{Scratch: decoded.Path, Parents: decoded.Parents}
	default:
		if len(folders) < 2 {
			return compute.Layers{}, invalid("spec.windows.layerFolders has %d entry: it lists the image layers (nearest parent first, base layer last) and then the scratch layer, so at least 2", len(folders))
		}
		n := len(folders) - 1
		l = compute.Layers{Scratch: folders[n], Parents: append([]string(nil), folders[:n]...)}
	}

	seen := make(map[string]bool)
	for _, p := range append([]string{l.Scratch}, l.Parents...) {
		switch {
		case p == "":
			return compute.Layers{}, invalid("a layer path is empty: every layer is a directory path")
		case !winpath.IsAbsHostPath(p):
			return compute.Layers{}, invalid("layer path %q is not absolute: layers are given as absolute host directories", p)
		case seen[strings.ToLower(p)]:
			return compute.Layers{}, invalid("layer path %q appears twice: each layer is a different directory", p)
		}
		seen[strings.ToLower(p)] = true
	}
	return l, nil
}

// mountsFrom splits the spec's mounts into mapped directories and mapped
// named pipes.
func mountsFrom(mounts []specs.Mount) ([]compute.MappedDirectory, []compute.MappedPipe, error) {
	var (
		dirs  []compute.MappedDirectory
		pipes []compute.MappedPipe
		seen  = make(map[string]int)
	)
	for i, m := range mounts {
		field := fmt.Sprintf("spec.mounts[%d]", i)
		switch m.Type {
		case "", "bind":
		case "physical-disk", "virtual-disk", "extensible-virtual-disk":
			return nil, nil, invalid("%s has type %q: disk mounts need a Hyper-V isolated container; mount a host directory (type empty) or use runhcs", field, m.Type)
		default:
			return nil, nil, invalid("%s has type %q, which Windows does not have: a process-isolated container takes bind mounts of host directories and named pipes (type empty)", field, m.Type)
		}
		if len(m.UIDMappings) > 0 || len(m.GIDMappings) > 0 {
			return nil, nil, invalid("%s has uidMappings or gidMappings: ID-mapped mounts are Linux-only; remove them", field)
		}
		if m.Source == "" {
			return nil, nil, invalid("%s has no source: set the host directory or \\\\.\\pipe\\ path to mount", field)
		}
		if m.Destination == "" {
			return nil, nil, invalid("%s (source %q) has no destination: set where it appears in the container", field, m.Source)
		}
		if strings.HasPrefix(m.Source, "sandbox://") || strings.HasPrefix(m.Source, "uvm://") {
			return nil, nil, invalid("%s has source %q: sandbox:// and uvm:// sources live in a utility VM, which only Hyper-V isolation (runhcs) has; mount a host path", field, m.Source)
		}
		readOnly := false
		for _, o := range m.Options {
			switch strings.ToLower(o) {
			case "ro":
				readOnly = true
			case "rw":
				// Read-write is the default; "ro" anywhere wins.
			case "bind", "rbind", "private", "rprivate":
				// What a Windows mapping always is: a recursive bind
				// that does not propagate mounts.
			default:
				return nil, nil, invalid("%s (destination %q) has option %q, which a Windows mapped directory cannot honour: only ro and rw (and the no-op bind, rbind, private, rprivate) are supported; remove it", field, m.Destination, o)
			}
		}

		srcPipe, srcIsPipe := winpath.PipeName(m.Source)
		dstPipe, dstIsPipe := winpath.PipeName(m.Destination)
		switch {
		case srcIsPipe && dstIsPipe:
			if srcPipe == "" || dstPipe == "" {
				return nil, nil, invalid("%s maps pipe %q to %q: a named pipe path needs a name after \\\\.\\pipe\\", field, m.Source, m.Destination)
			}
			key := strings.ToLower(m.Destination)
			if j, dup := seen[key]; dup {
				return nil, nil, invalid("%s and spec.mounts[%d] both map to pipe %q: give each mount its own destination", field, j, m.Destination)
			}
			seen[key] = i
			pipes = append(pipes, compute.MappedPipe{HostPath: m.Source, ContainerPipeName: dstPipe})
			continue
		case srcIsPipe:
			return nil, nil, invalid("%s maps named pipe %q to %q: a named pipe mounts onto a \\\\.\\pipe\\NAME destination", field, m.Source, m.Destination)
		case dstIsPipe:
			return nil, nil, invalid("%s maps %q to named pipe %q: only a host named pipe (\\\\.\\pipe\\NAME) can be mounted as a pipe", field, m.Source, m.Destination)
		}

		if !winpath.IsAbsHostPath(m.Source) {
			return nil, nil, invalid("%s has source %q, which is not an absolute host path: give the full path of the host directory", field, m.Source)
		}
		dst, err := winpath.ContainerPath(m.Destination)
		if err != nil {
			return nil, nil, invalid("%s has destination %q, which %v", field, m.Destination, err)
		}
		key := strings.ToLower(dst)
		if j, dup := seen[key]; dup {
			return nil, nil, invalid("%s and spec.mounts[%d] both map to %s: give each mount its own destination", field, j, dst)
		}
		seen[key] = i
		dirs = append(dirs, compute.MappedDirectory{HostPath: m.Source, ContainerPath: dst, ReadOnly: readOnly})
	}
	return dirs, pipes, nil
}

// resourcesFrom translates Windows resource limits; field names the
// resources in errors.
func resourcesFrom(r *specs.WindowsResources, hostCPUs int, field string) (compute.Resources, error) {
	if hostCPUs < 1 {
		return compute.Resources{}, invalid("the host processor count %d is not positive", hostCPUs)
	}
	var res compute.Resources
	if r == nil {
		return res, nil
	}
	if c := r.CPU; c != nil {
		// As in HCS, a zero value is no setting.
		var set []string
		if c.Count != nil && *c.Count > 0 {
			set = append(set, fmt.Sprintf("count (%d)", *c.Count))
			if *c.Count > uint64(hostCPUs) {
				res.CPUCount = uint32(hostCPUs)
				res.CPUCountCapped = true
				res.RequestedCPUCount = *c.Count
			} else {
				res.CPUCount = uint32(*c.Count)
			}
		}
		if c.Maximum != nil && *c.Maximum > 0 {
			set = append(set, fmt.Sprintf("maximum (%d)", *c.Maximum))
			if *c.Maximum > 10000 {
				return compute.Resources{}, invalid("%s.cpu.maximum is %d: it is the share of all host processors in hundredths of a percent, 1 to 10000", field, *c.Maximum)
			}
			res.CPUMaximum = *c.Maximum
		}
		if c.Shares != nil && *c.Shares > 0 {
			set = append(set, fmt.Sprintf("shares (%d)", *c.Shares))
			if *c.Shares > 10000 {
				return compute.Resources{}, invalid("%s.cpu.shares is %d: Windows processor weight is 1 to 10000", field, *c.Shares)
			}
			res.CPUWeight = *c.Shares
		}
		if len(set) > 1 {
			return compute.Resources{}, invalid("%s.cpu sets %s: Windows applies only one of count, maximum and shares; keep one", field, strings.Join(set, " and "))
		}
		groups := make(map[uint32]bool)
		for i, a := range c.Affinity {
			switch {
			case a.Mask == 0:
				return compute.Resources{}, invalid("%s.cpu.affinity[%d] has an empty mask: set the processors of group %d to use", field, i, a.Group)
			case a.Group > 0xffff:
				return compute.Resources{}, invalid("%s.cpu.affinity[%d] names processor group %d: Windows groups are numbered 0 to 65535", field, i, a.Group)
			case groups[a.Group]:
				return compute.Resources{}, invalid("%s.cpu.affinity lists processor group %d twice: give one mask per group", field, a.Group)
			}
			groups[a.Group] = true
			res.CPUAffinity = append(res.CPUAffinity, compute.CPUGroupAffinity{Mask: a.Mask, Group: uint16(a.Group)})
		}
	}
	if m := r.Memory; m != nil && m.Limit != nil {
		res.MemoryLimitBytes = *m.Limit
	}
	if s := r.Storage; s != nil {
		if s.Iops != nil {
			res.StorageIOPSMaximum = *s.Iops
		}
		if s.Bps != nil {
			res.StorageBandwidthMaximum = *s.Bps
		}
	}
	return res, nil
}

func networkFrom(n *specs.WindowsNetwork) (compute.Network, error) {
	if n == nil {
		return compute.Network{}, nil
	}
	for i, e := range n.EndpointList {
		if e == "" {
			return compute.Network{}, invalid("spec.windows.network.endpointList[%d] is empty: list HNS endpoint ids", i)
		}
	}
	for i, d := range n.DNSSearchList {
		if d == "" || strings.ContainsAny(d, ", \t") {
			return compute.Network{}, invalid("spec.windows.network.DNSSearchList[%d] is %q: each entry is one DNS suffix, such as svc.cluster.local", i, d)
		}
	}
	return compute.Network{
		Namespace:                n.NetworkNamespace,
		Endpoints:                append([]string(nil), n.EndpointList...),
		SharedContainerName:      n.NetworkSharedContainerName,
		DNSSearchList:            append([]string(nil), n.DNSSearchList...),
		AllowUnqualifiedDNSQuery: n.AllowUnqualifiedDNSQuery,
	}, nil
}

// credentialSpec normalises spec.windows.credentialSpec, which is either
// the credential spec's JSON text (what containerd's CRI passes) or the
// JSON object itself (when the spec was read from JSON), to the text.
func credentialSpec(v any) (string, error) {
	const fix = "spec.windows.credentialSpec must be a gMSA credential spec: a JSON object, or a string holding one"
	switch cs := v.(type) {
	case nil:
		return "", nil
	case string:
		if cs == "" {
			return "", nil
		}
		if !isJSONObject([]byte(cs)) {
			return "", invalid("%s; the string given is not a JSON object", fix)
		}
		return cs, nil
	}
	b, err := json.Marshal(v)
	if err != nil || !isJSONObject(b) {
		return "", invalid("%s; got a %T", fix, v)
	}
	return string(b), nil
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

var guidPattern = regexp.MustCompile(`^(\{[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\}|[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})$`)

// devicesFrom takes the devices to assign: whole interface classes (idType
// "class", which containerd's CRI writes, or hcsshim's "vpci-class-guid")
// and single devices by location path ("vpci-location-path"), as runhcs's
// parseAssignedDevices (internal/hcsoci/hcsdoc_wcow.go) takes them for
// process isolation.
func devicesFrom(devices []specs.WindowsDevice) ([]compute.Device, error) {
	var out []compute.Device
	for i, d := range devices {
		switch d.IDType {
		case "class", "vpci-class-guid":
			if !guidPattern.MatchString(d.ID) {
				return nil, invalid("spec.windows.devices[%d] has id %q, which is not an interface class GUID such as 5B45201D-F2F2-4F3B-85BB-30FF1F953599", i, d.ID)
			}
			out = append(out, compute.Device{Kind: compute.DeviceClass, ID: d.ID})
		case "vpci-location-path":
			if d.ID == "" {
				return nil, invalid("spec.windows.devices[%d] has an empty location path: give the device's location path, such as PCIROOT(0)#PCI(0100)", i)
			}
			out = append(out, compute.Device{Kind: compute.DeviceLocationPath, ID: d.ID})
		default:
			return nil, invalid("spec.windows.devices[%d] has idType %q: winproc assigns an interface class (idType \"class\" or \"vpci-class-guid\") or one device by location path (\"vpci-location-path\")", i, d.IDType)
		}
	}
	return out, nil
}

// processFrom translates a process; field names it in errors.
func processFrom(p *specs.Process, field string) (*compute.ProcessSettings, error) {
	if err := checkProcessFields(p, field); err != nil {
		return nil, err
	}
	ps := &compute.ProcessSettings{
		CommandLine:      p.CommandLine,
		WorkingDirectory: p.Cwd,
		User:             p.User.Username,
		Terminal:         p.Terminal,
	}
	if ps.CommandLine == "" {
		// The runtime spec: without commandLine, the runtime escapes and
		// joins args. (Docker's ArgsEscaped images are containerd's
		// business: it turns them into commandLine.)
		switch {
		case len(p.Args) == 0:
			return nil, invalid("%s has neither args nor commandLine: set the command to run", field)
		case p.Args[0] == "":
			return nil, invalid("%s.args[0] is empty: it names the program to run", field)
		}
		ps.CommandLine = wincmdline.JoinArgs(p.Args)
	}
	lineField := field + ".args"
	if p.CommandLine != "" {
		lineField = field + ".commandLine"
	}
	if err := validation.CommandLine(ps.CommandLine, lineField); err != nil {
		return nil, err
	}
	if err := validation.User(ps.User, field+".user.username"); err != nil {
		return nil, err
	}
	if ps.WorkingDirectory == "" {
		ps.WorkingDirectory = `C:\`
	}
	if err := validation.Env(p.Env, field+".env"); err != nil {
		return nil, err
	}
	ps.Env = append([]string(nil), p.Env...)
	if p.Terminal && p.ConsoleSize != nil {
		if p.ConsoleSize.Width > 0xffff || p.ConsoleSize.Height > 0xffff {
			return nil, invalid("%s.consoleSize is %dx%d: a console is at most 65535 characters each way", field, p.ConsoleSize.Width, p.ConsoleSize.Height)
		}
		ps.ConsoleWidth = uint16(p.ConsoleSize.Width)
		ps.ConsoleHeight = uint16(p.ConsoleSize.Height)
	}
	return ps, nil
}

// checkProcessFields refuses the process fields that only POSIX systems
// have.
func checkProcessFields(p *specs.Process, field string) error {
	linuxOnly := func(name string) error {
		return invalid("%s.%s is set: it is a Linux setting that Windows containers do not have; remove it", field, name)
	}
	switch {
	case p.Capabilities != nil:
		return linuxOnly("capabilities")
	case len(p.Rlimits) > 0:
		return linuxOnly("rlimits")
	case p.NoNewPrivileges:
		return linuxOnly("noNewPrivileges")
	case p.ApparmorProfile != "":
		return linuxOnly("apparmorProfile")
	case p.OOMScoreAdj != nil:
		return linuxOnly("oomScoreAdj")
	case p.Scheduler != nil:
		return linuxOnly("scheduler")
	case p.SelinuxLabel != "":
		return linuxOnly("selinuxLabel")
	case p.IOPriority != nil:
		return linuxOnly("ioPriority")
	case p.ExecCPUAffinity != nil:
		return linuxOnly("execCPUAffinity")
	case p.User.Umask != nil:
		return linuxOnly("user.umask")
	}
	const user = "a Windows user is a name: set user.username (for example ContainerUser) and leave the numeric ids 0"
	if p.User.UID != 0 || p.User.GID != 0 {
		return invalid("%s.user has uid %d and gid %d: %s", field, p.User.UID, p.User.GID, user)
	}
	for _, g := range p.User.AdditionalGids {
		// containerd's WithUser puts the gid, 0, here for every spec.
		if g != 0 {
			return invalid("%s.user.additionalGids has %d: %s", field, g, user)
		}
	}
	return nil
}
