// Package containerdnames holds the names winproc is known by in
// containerd: the runtime type containerd maps to
// containerd-shim-winproc-v2, the proxy plugins winproc-snapshotter serves,
// and the platform they are for. It is a leaf: the shim, the config
// generator and doctor share these names without linking each other.
package containerdnames

const (
	// RuntimeType is the runtime_type of a winproc handler.
	RuntimeType = "io.containerd.winproc.v2"
	// Snapshotter and Differ are the proxy plugins' names.
	Snapshotter = "windowsfilter"
	Differ      = "windowsfilter-diff"
	// Platform is the platform of the images they unpack.
	Platform = "windows/amd64"
	// ProtectedPipePrefix is where winproc's named pipes are: only
	// Administrators (and SYSTEM) can create a pipe under it, so no user
	// can create a pipe of the same name first and have containerd, which
	// runs as SYSTEM, talk to it. runhcs's pipes are there too.
	ProtectedPipePrefix = `\\.\pipe\ProtectedPrefix\Administrators\`
	// SnapshotterAddressWindows and SnapshotterRootWindows are where
	// winproc-snapshotter serves, and keeps its snapshots, on a Windows
	// node by default.
	SnapshotterAddressWindows = ProtectedPipePrefix + "winproc-snapshotter"
	SnapshotterRootWindows    = StateRootWindows + `\snapshotter`
	// StateRootWindows holds winproc's state on a Windows node: the
	// snapshotter's root and the shim's records of silos
	// (ShimStateDirWindows) and of HostProcess containers
	// (JobContainerStateDirWindows).
	// winproc creates its directories for Administrators and SYSTEM only,
	// as containerd does its own; `winproc doctor` reports them when
	// others can use them.
	StateRootWindows            = `C:\ProgramData\winproc`
	ShimStateDirWindows         = StateRootWindows + `\hcs`
	JobContainerStateDirWindows = StateRootWindows + `\jobcontainer`
	// EmulationStateDir is the directory of containerd's state directory
	// where the Linux emulation keeps its compute systems, one directory
	// per namespace: the shim's and `winproc doctor`'s.
	EmulationStateDir = "winproc-emulation"
)

// Annotations are the annotations of a pod or container that a winproc
// handler has containerd forward to the shim: those the shim acts on
// (runhcs's, for process isolation; shim/specconv.HonouredAnnotations),
// sorted. Others would reach the shim only to be ignored.
var Annotations = []string{
	"io.microsoft.container.memory.sizeinmb",
	"io.microsoft.container.processdumplocation",
	"io.microsoft.container.processor.count",
	"io.microsoft.container.processor.limit",
	"io.microsoft.container.processor.weight",
	"io.microsoft.container.storage.qos.bandwidthmaximum",
	"io.microsoft.container.storage.qos.iopsmaximum",
	"io.microsoft.container.wcow.gmsa.disable",
	"io.microsoft.disable-unsafe-operations",
	"io.microsoft.wcow.processdumpcount",
	"io.microsoft.wcow.processdumptype",
	"microsoft.com/hostprocess-inherit-user",
}
