// Package containerdconfig writes the containerd config.toml (version 3)
// that registers winproc on a node: the runtime handler, the windowsfilter
// snapshotter and differ as proxy plugins, the image platform of the handler,
// the transfer service's unpack rule for Windows layers and, off Windows,
// what lets the transfer service extract a pull's layers in parallel.
//
// The same generator serves Windows nodes (named pipes, C:\ paths) and the
// Linux emulation (unix sockets); the integration tests start the real
// containerd with its output, so what operators get is what is tested.
package containerdconfig

import (
	"bytes"
	"cmp"
	"fmt"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/pelletier/go-toml/v2"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/options"
)

// Node describes one node's containerd and winproc.
type Node struct {
	// OS is the node's operating system: "windows", or "linux" for the
	// emulation.
	OS string
	// Root, State and Address place containerd itself; leave them empty
	// for a fragment merged into an existing config.
	Root, State, Address string
	// ShimSocketDir, when set, is where containerd has shims put their
	// sockets (default: containerd's state directory's s/).
	ShimSocketDir string
	// SnapshotterAddress is where winproc-snapshotter listens, and
	// SnapshotterRoot where it keeps its snapshots: containerd's CRI
	// reports the image file system there (ImageFsInfo, and the writable
	// layers of ContainerStats).
	SnapshotterAddress, SnapshotterRoot string
	// CRIDefaultSnapshotter makes windowsfilter the default snapshotter of
	// containerd's CRI images. containerd's CRI counts the usage of its
	// default snapshotter only (its snapshot syncer walks no other), and
	// the kubelet reads the first image file system ImageFsInfo lists, the
	// default's: without it the kubelet's image garbage collection and
	// imagefs eviction do not see winproc's images. It also sends other
	// handlers' images there.
	CRIDefaultSnapshotter bool
	// Handler is the runtime handler name RuntimeClasses refer to.
	Handler string
	// Sandboxer is "shim" (the shim owns the pod and its pause container)
	// or "podsandbox" (containerd creates the pause container as a task).
	Sandboxer string
	// Options are the shim's runtime options.
	Options options.Options
	// CNIBinDirs and CNIConfDir, when set, are where containerd's CRI finds
	// CNI plugins and network configs (default: containerd's).
	CNIBinDirs []string
	CNIConfDir string
	// NetNSUnderState has containerd mount pods' network namespaces below
	// its state directory instead of /var/run/netns (Linux only).
	NetNSUnderState bool
	// DefaultHandler makes Handler containerd's default CRI handler, the one
	// pods with no RuntimeClass run on: kube-proxy, CNI plugins, csi-proxy
	// and node agents run as HostProcess DaemonSets that name none, so
	// winproc runs them only as the default.
	DefaultHandler bool
	// DisablePauseImagePull keeps containerd from pulling the pause image
	// before each pod, for nodes whose pause image is imported (no
	// registry) or pinned by the operator.
	DisablePauseImagePull bool
	// UnpackConcurrency is how many layers containerd's transfer service
	// (ctr pulls, CRI pulls) extracts at once: 0 is
	// DefaultUnpackConcurrency off Windows and 1 on Windows, where
	// winproc-snapshotter imports a layer only with its parents (see
	// package snapshotter); 1 is containerd's sequential unpack.
	UnpackConcurrency int
}

// DefaultUnpackConcurrency is the emulation's number of layers extracted
// at once. The limit is the transfer service's, shared by every pull it
// runs; docs/pull.md has the measurements behind it.
const DefaultUnpackConcurrency = 3

// Windows returns the usual settings of a Windows node. Its sandboxer is
// "podsandbox": containerd's Windows CRI reads a pod's process count from a
// containerd container record of the sandbox (sandbox_stats_windows.go
// getSandboxPidCount), which only podsandbox mode makes, so in shim mode
// ListPodSandboxStats leaves every winproc pod out and PodSandboxStats
// fails; the kubelet calls both with PodAndContainerStatsFromCRI (beta from
// 1.37) and before lowering a memory limit in place (docs/cri-sandbox-modes.md).
func Windows() Node {
	return Node{
		OS:                 "windows",
		SnapshotterAddress: containerdnames.SnapshotterAddressWindows,
		SnapshotterRoot:    containerdnames.SnapshotterRootWindows,
		Handler:            "winproc",
		Sandboxer:          "podsandbox",
	}
}

type file struct {
	Version      int                    `toml:"version"`
	Root         string                 `toml:"root,omitempty"`
	State        string                 `toml:"state,omitempty"`
	GRPC         *grpcSection           `toml:"grpc,omitempty"`
	ProxyPlugins map[string]proxyPlugin `toml:"proxy_plugins"`
	Plugins      map[string]any         `toml:"plugins"`
}

type grpcSection struct {
	Address string `toml:"address"`
}

type cniSection struct {
	BinDirs []string `toml:"bin_dirs,omitempty"`
	ConfDir string   `toml:"conf_dir,omitempty"`
}

// rootExport is a proxy snapshotter's exports naming its root (none when
// root is ""), which containerd would otherwise guess below its own root.
func rootExport(root string) map[string]string {
	if root == "" {
		return nil
	}
	return map[string]string{"root": root}
}

type proxyPlugin struct {
	Type         string            `toml:"type"`
	Address      string            `toml:"address"`
	Platform     string            `toml:"platform"`
	Exports      map[string]string `toml:"exports,omitempty"`
	Capabilities []string          `toml:"capabilities,omitempty"`
}

type runtime struct {
	RuntimeType           string          `toml:"runtime_type"`
	Sandboxer             string          `toml:"sandboxer"`
	Snapshotter           string          `toml:"snapshotter"`
	DisablePauseImagePull bool            `toml:"disable_pause_image_pull,omitempty"`
	PodAnnotations        []string        `toml:"pod_annotations"`
	ContainerAnnotations  []string        `toml:"container_annotations"`
	Options               options.Options `toml:"options"`
}

type imagePlatform struct {
	Platform    string `toml:"platform"`
	Snapshotter string `toml:"snapshotter"`
}

type unpackRule struct {
	Platform    string `toml:"platform"`
	Snapshotter string `toml:"snapshotter"`
	Differ      string `toml:"differ"`
}

// unpackRules are the transfer service's unpack rules. containerd applies
// its built-in rule only when none is configured, so on Windows the rule for
// its own windows snapshotter stays, first: pulls that name no snapshotter
// unpack as before (runhcs keeps working), pulls for windowsfilter (CRI's
// for the winproc handler, ctr --snapshotter) use ours.
func unpackRules(os string) []unpackRule {
	ours := unpackRule{Platform: containerdnames.Platform, Snapshotter: containerdnames.Snapshotter, Differ: containerdnames.Differ}
	if os == "windows" {
		return []unpackRule{{Platform: containerdnames.Platform, Snapshotter: "windows", Differ: "windows"}, ours}
	}
	return []unpackRule{ours}
}

// diffChain is the diff service's differ order for client-side unpacks
// (pulls that bypass the transfer service), or nil to keep containerd's.
// On Windows containerd's chain, ["windows", "windows-lcow"], stays as it
// is: its windows differ applies layers into windowsfilter snapshots too,
// and a chain set here would replace it. On Linux no differ of containerd's
// applies Windows layers, so ours goes in front of containerd's Linux chain,
// ["walking"]; it declines the snapshots of other snapshotters, which then
// reach walking.
func diffChain(goos string) []string {
	if goos == "linux" {
		return []string{containerdnames.Differ, "walking"}
	}
	return nil
}

// unpackConcurrency is n's number of layers extracted at once.
func unpackConcurrency(n Node) (int, error) {
	switch {
	case n.UnpackConcurrency < 0:
		return 0, fmt.Errorf("containerd config: unpack concurrency %d: use 0 for the default, or a positive number", n.UnpackConcurrency)
	case n.OS == "windows" && n.UnpackConcurrency > 1:
		return 0, fmt.Errorf("containerd config: unpack concurrency %d: on Windows winproc-snapshotter imports a layer with its parents, one layer after another", n.UnpackConcurrency)
	case n.UnpackConcurrency > 0:
		return n.UnpackConcurrency, nil
	case n.OS == "windows":
		return 1, nil
	}
	return DefaultUnpackConcurrency, nil
}

// parallelUnpack lets the transfer service extract unpacks layers at once.
// containerd's unpacker extracts layers in parallel only with an unpack
// limiter (the transfer service's max_concurrent_unpacks) and a snapshotter
// that can take a layer's parent at commit (core/unpack/unpacker.go,
// supportParallel).
func (f *file) parallelUnpack(unpacks int) {
	sn := f.ProxyPlugins[containerdnames.Snapshotter]
	sn.Capabilities = []string{snapshots.RebaseCap}
	f.ProxyPlugins[containerdnames.Snapshotter] = sn
	f.Plugins["io.containerd.transfer.v1.local"].(map[string]any)["max_concurrent_unpacks"] = unpacks
}

// check refuses a node the config cannot be made for.
func (n Node) check() error {
	if n.Handler == "" {
		return fmt.Errorf("containerd config: a runtime handler name is required")
	}
	if n.SnapshotterAddress == "" {
		return fmt.Errorf("containerd config: the snapshotter address is required")
	}
	switch n.OS {
	case "windows", "linux":
	default:
		return fmt.Errorf("containerd config: node OS %q: use \"windows\" or \"linux\"", n.OS)
	}
	switch n.Sandboxer {
	case "shim", "podsandbox":
	default:
		return fmt.Errorf("containerd config: sandboxer %q: use \"shim\" or \"podsandbox\"", n.Sandboxer)
	}
	return nil
}

// Generate returns the config as TOML.
func Generate(n Node) ([]byte, error) {
	if err := n.check(); err != nil {
		return nil, err
	}
	unpacks, err := unpackConcurrency(n)
	if err != nil {
		return nil, err
	}

	f := file{
		Version: 3,
		Root:    n.Root,
		State:   n.State,
		ProxyPlugins: map[string]proxyPlugin{
			containerdnames.Snapshotter: {Type: "snapshot", Address: n.SnapshotterAddress, Platform: containerdnames.Platform, Exports: rootExport(n.SnapshotterRoot)},
			containerdnames.Differ:      {Type: "diff", Address: n.SnapshotterAddress, Platform: containerdnames.Platform},
		},
		Plugins: map[string]any{
			"io.containerd.cri.v1.runtime": map[string]any{
				"containerd": map[string]any{
					"runtimes": map[string]runtime{
						n.Handler: {
							RuntimeType:           containerdnames.RuntimeType,
							Sandboxer:             n.Sandboxer,
							Snapshotter:           containerdnames.Snapshotter,
							DisablePauseImagePull: n.DisablePauseImagePull,
							// The annotations the shim acts on, of pods
							// (the pause container) and of containers.
							PodAnnotations:       containerdnames.Annotations,
							ContainerAnnotations: containerdnames.Annotations,
							Options:              n.Options,
						},
					},
				},
			},
			"io.containerd.cri.v1.images": map[string]any{
				"runtime_platforms": map[string]imagePlatform{
					n.Handler: {Platform: containerdnames.Platform, Snapshotter: containerdnames.Snapshotter},
				},
			},
			// Pulls through the transfer service (ctr, CRI) unpack Windows
			// layers with our snapshotter and differ.
			"io.containerd.transfer.v1.local": map[string]any{
				"unpack_config": unpackRules(n.OS),
			},
		},
	}
	if unpacks > 1 {
		f.parallelUnpack(unpacks)
	}
	if n.Sandboxer == "podsandbox" {
		// containerd then creates the pause container itself, from the
		// node's sandbox image rather than the handler's options.
		f.Plugins["io.containerd.cri.v1.images"].(map[string]any)["pinned_images"] = map[string]string{
			"sandbox": cmp.Or(n.Options.PauseImage, options.DefaultPauseImage),
		}
	}
	if n.CRIDefaultSnapshotter {
		f.Plugins["io.containerd.cri.v1.images"].(map[string]any)["snapshotter"] = containerdnames.Snapshotter
	}
	criRuntime := f.Plugins["io.containerd.cri.v1.runtime"].(map[string]any)
	if n.DefaultHandler {
		criRuntime["containerd"].(map[string]any)["default_runtime_name"] = n.Handler
	}
	if len(n.CNIBinDirs) > 0 || n.CNIConfDir != "" {
		criRuntime["cni"] = cniSection{BinDirs: n.CNIBinDirs, ConfDir: n.CNIConfDir}
	}
	if n.NetNSUnderState {
		if n.OS != "linux" {
			return nil, fmt.Errorf("containerd config: network namespaces below the state directory are a Linux setting")
		}
		criRuntime["netns_mounts_under_state_dir"] = true
	}
	if n.OS == "linux" {
		// Linux NRI leaves "linux": {} in every spec, even with no plugin,
		// and the shim refuses a Windows spec with a linux section.
		f.Plugins["io.containerd.nri.v1.nri"] = map[string]any{"disable": true}
	}
	if d := diffChain(n.OS); d != nil {
		f.Plugins["io.containerd.service.v1.diff-service"] = map[string]any{"default": d}
	}
	if n.Address != "" {
		f.GRPC = &grpcSection{Address: n.Address}
	}
	if n.ShimSocketDir != "" {
		f.Plugins["io.containerd.shim.v1.manager"] = map[string]any{"socket_dir": n.ShimSocketDir}
	}
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(true)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("containerd config: %w", err)
	}
	return buf.Bytes(), nil
}
