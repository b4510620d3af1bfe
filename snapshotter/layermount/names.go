package layermount

import "path/filepath"

// The top directories of a layer, as containerd's windows snapshotter and
// HCS's layer functions write them, and as the layer tar names its entries.
const (
	// FilesDir holds the layer's C:\ tree.
	FilesDir = "Files"
	// HivesDir holds the registry hives of a base layer.
	HivesDir = "Hives"
	// UtilityVMDir holds a base layer's utility VM image, which process
	// isolation does not use.
	UtilityVMDir = "UtilityVM"
)

// The scratch of a container on Windows: its Path holds SandboxVHDX, a copy
// of the base layer's BlankVHDX.
const (
	BlankVHDX   = "blank.vhdx"
	SandboxVHDX = "sandbox.vhdx"
)

// The scratch of a container in the Linux emulation: its Path holds
// ScratchUpper, the upper directory of the shim's overlay mount of drive C:
// (its deletions are overlayfs whiteouts, as the layer importer writes
// them, so a committed scratch is a layer as it stands), and ScratchWork,
// overlayfs's workdir. The parents' FilesDir are the lower directories.
const (
	ScratchUpper = FilesDir
	ScratchWork  = "work"
)

// SnapshotsDir is the directory under a windowsfilter snapshotter's root
// that holds one directory per snapshot, named by its id: the directories
// a snapshot's mount names.
func SnapshotsDir(root string) string {
	return filepath.Join(root, "snapshots")
}
