// Package options is the shim's runtime options: the table an operator
// writes under the winproc handler in containerd's config.toml,
//
//	[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.winproc.options]
//	  pause_image = "registry.example/pause:ltsc2022"
//
// containerd does not know our runtime type, so it passes the table on as a
// runtimeoptions.v1.Options whose ConfigBody holds it as TOML.
//
// There is no scratch size option: a container's scratch size comes with
// the container, as CRI's rootfs_size_in_bytes, which containerd passes to
// the snapshotter as the containerd.io/snapshot/windows/rootfs.sizebytes
// label, or as the spec's windows.resources.storage.sandboxSize.
package options

import (
	"bytes"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"
)

// DefaultPauseImage is the pause image a pod uses when the handler names
// none: the Windows Server 2022 build of Kubernetes' pause image.
const DefaultPauseImage = "registry.k8s.io/pause:3.10"

// Options configures the shim for one runtime handler.
type Options struct {
	// PauseImage is the image of the pod's infrastructure container when
	// the shim owns the pod (sandboxer = "shim").
	PauseImage string `toml:"pause_image,omitempty"`
	// WineTemplatePrefix is, for the Linux emulation backend only, the Wine
	// prefix every compute system's prefix is an overlay of.
	WineTemplatePrefix string `toml:"wine_template_prefix,omitempty"`
	// HostBuild is, for the Linux emulation only, the Windows build the
	// emulated host claims (default 10.0.20348, as the snapshotter's); on
	// Windows the host's own build is read from the system.
	HostBuild string `toml:"host_build,omitempty"`
}

// Env carries the options from the shim's `start` to the shim it launches.
const Env = "WINPROC_RUNTIME_OPTIONS"

// Decode reads options from the TOML body containerd passes; an empty body
// is the defaults. Unknown keys are refused, so a misspelt option is not
// silently ignored.
func Decode(body []byte) (Options, error) {
	var o Options
	if len(body) > 0 {
		dec := toml.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return Options{}, fmt.Errorf("decode winproc runtime options: %w: %w", err, errdefs.ErrInvalidArgument)
		}
	}
	if o.PauseImage == "" {
		o.PauseImage = DefaultPauseImage
	}
	return o, nil
}
