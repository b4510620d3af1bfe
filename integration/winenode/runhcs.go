//go:build linux

package winenode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/winproc/winproc/install"
)

// RunhcsHandler is the runtime handler of the incumbent shim,
// containerd-shim-runhcs-v1.exe, on a node started with Options.Runhcs:
// the name and the settings containerd.exe's Windows defaults give it
// (internal/cri/config/config_windows.go), with winproc-snapshotter's
// windowsfilter snapshotter, which serves the mounts runhcs reads, and the
// node's log level. A CRI client selects it with the pod's runtime handler
// (crictl runp --runtime, critest --runtime-handler).
const RunhcsHandler = "runhcs-wcow-process"

// RunhcsShim is the incumbent shim's executable, as containerd.exe finds
// it for the runtime type io.containerd.runhcs.v1.
const RunhcsShim = "containerd-shim-runhcs-v1.exe"

// runhcsHandler is the handler's part of containerd's config, appended to
// the node's fragment: the tables are new, so TOML allows them after the
// fragment's own. The log level is the node's; ScrubLogs and the
// container annotations are containerd's defaults for the handler.
const runhcsHandler = `
[plugins.'io.containerd.cri.v1.images'.runtime_platforms.%[1]s]
  platform = 'windows/amd64'
  snapshotter = 'windowsfilter'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s]
  runtime_type = 'io.containerd.runhcs.v1'
  sandboxer = 'podsandbox'
  snapshotter = 'windowsfilter'
  container_annotations = ['io.microsoft.container.*']

  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s.options]
    ScrubLogs = true
    LogLevel = '%[2]s'
`

// shimModeHandler is a second winproc handler in shim mode, beside the
// fragment's own, appended like runhcsHandler.
const shimModeHandler = `
[plugins.'io.containerd.cri.v1.images'.runtime_platforms.%[1]s]
  platform = 'windows/amd64'
  snapshotter = 'windowsfilter'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s]
  runtime_type = 'io.containerd.winproc.v2'
  sandboxer = 'shim'
  snapshotter = 'windowsfilter'
  disable_pause_image_pull = true

  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s.options]
    pause_image = '%[2]s'
`

// installPeers installs what Options.Runhcs and Options.ShimModeHandler
// ask for: the incumbent shim beside containerd.exe and its handler, and
// winproc's handler in shim mode.
func (n *Node) installPeers(bins Binaries) {
	var extra strings.Builder
	if n.opts.Runhcs {
		b, err := os.ReadFile(bins.Runhcs)
		if err != nil {
			n.t.Fatalf("install %s (build/tools.sh builds it): %v", RunhcsShim, err)
		}
		if err := os.WriteFile(filepath.Join(n.Path(InstallDir), RunhcsShim), b, 0o755); err != nil {
			n.t.Fatal(err)
		}
		fmt.Fprintf(&extra, runhcsHandler, RunhcsHandler, n.logLevel())
	}
	if name := n.opts.ShimModeHandler; name != "" {
		fmt.Fprintf(&extra, shimModeHandler, name, PauseImage)
	}
	if extra.Len() == 0 {
		return
	}
	fragment := filepath.Join(n.Path(InstallDir), "conf.d", install.FragmentFile)
	f, err := os.OpenFile(fragment, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(extra.String()); err != nil {
		n.t.Fatal(err)
	}
}

// logLevel is containerd.exe's log level, Options.LogLevel or debug.
func (n *Node) logLevel() string {
	if n.opts.LogLevel != "" {
		return n.opts.LogLevel
	}
	return "debug"
}

// RunhcsPIDs are the Linux PIDs of the node's running incumbent shims.
func (n *Node) RunhcsPIDs() []int { return n.Processes(RunhcsShim) }
