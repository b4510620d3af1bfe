//go:build windows

package scratch

import "github.com/Microsoft/hcsshim"

// Host is hcsshim's public layer functions. They join DriverInfo.HomeDir
// and the id; an empty HomeDir and the layer's full path is the path
// itself (as hcsshim's wclayer tool calls them). Their errors are
// hcsshim's HcsError, with the Windows error inside.
type Host struct{}

var _ Layers = Host{}

var layerDriver = hcsshim.DriverInfo{}

func (Host) Activate(path string) error { return hcsshim.ActivateLayer(layerDriver, path) }

func (Host) Prepare(path string, parents []string) error {
	return hcsshim.PrepareLayer(layerDriver, path, parents)
}

func (Host) MountPath(path string) (string, error) {
	return hcsshim.GetLayerMountPath(layerDriver, path)
}

func (Host) Unprepare(path string) error  { return hcsshim.UnprepareLayer(layerDriver, path) }
func (Host) Deactivate(path string) error { return hcsshim.DeactivateLayer(layerDriver, path) }

func (Host) Expand(path string, size uint64) error {
	return hcsshim.ExpandScratchSize(layerDriver, path, size)
}
