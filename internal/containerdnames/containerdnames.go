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
)
