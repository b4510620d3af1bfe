package containerdconfig

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/options"
)

func TestGenerateWindowsNode(t *testing.T) {
	n := Windows()
	n.Options = options.Options{PauseImage: "example/pause:ltsc2022"}
	out, err := Generate(n)
	if err != nil {
		t.Fatal(err)
	}

	// Read it back as containerd would: a generic TOML tree.
	var tree map[string]any
	if err := toml.Unmarshal(out, &tree); err != nil {
		t.Fatalf("generated config is not TOML: %v\n%s", err, out)
	}
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"version"}, int64(3)},
		{[]string{"proxy_plugins", "windowsfilter", "type"}, "snapshot"},
		{[]string{"proxy_plugins", "windowsfilter", "address"}, `\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter`},
		{[]string{"proxy_plugins", "windowsfilter", "platform"}, "windows/amd64"},
		{[]string{"proxy_plugins", "windowsfilter-diff", "type"}, "diff"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc", "runtime_type"}, "io.containerd.winproc.v2"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc", "sandboxer"}, "podsandbox"},
		{[]string{"plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"}, "example/pause:ltsc2022"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc", "snapshotter"}, "windowsfilter"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc", "options", "pause_image"}, "example/pause:ltsc2022"},
		{[]string{"plugins", "io.containerd.cri.v1.images", "runtime_platforms", "winproc", "platform"}, "windows/amd64"},
		{[]string{"plugins", "io.containerd.cri.v1.images", "runtime_platforms", "winproc", "snapshotter"}, "windowsfilter"},
	}
	for _, c := range checks {
		if got := lookup(tree, c.path); got != c.want {
			t.Errorf("%s = %#v, want %#v", strings.Join(c.path, "."), got, c.want)
		}
	}
	if nri := lookup(tree, []string{"plugins", "io.containerd.nri.v1.nri"}); nri != nil {
		t.Errorf("a Windows node's NRI is configured: %v", nri)
	}
	// The annotations the shim acts on, and only those, are forwarded.
	for _, key := range []string{"pod_annotations", "container_annotations"} {
		got := lookup(tree, []string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc", key})
		if fmt.Sprint(got) != fmt.Sprint(containerdnames.Annotations) {
			t.Errorf("%s = %v, want %v", key, got, containerdnames.Annotations)
		}
	}
	// containerd's own windows rule stays first; ours follows.
	unpack := lookup(tree, []string{"plugins", "io.containerd.transfer.v1.local", "unpack_config"}).([]any)
	if len(unpack) != 2 {
		t.Fatalf("unpack_config = %v, want the windows rule and ours", unpack)
	}
	builtin, ours := unpack[0].(map[string]any), unpack[1].(map[string]any)
	if builtin["platform"] != "windows/amd64" || builtin["snapshotter"] != "windows" || builtin["differ"] != "windows" {
		t.Errorf("first unpack rule = %v, want containerd's windows rule", builtin)
	}
	if ours["platform"] != "windows/amd64" || ours["snapshotter"] != "windowsfilter" || ours["differ"] != "windowsfilter-diff" {
		t.Errorf("second unpack rule = %v", ours)
	}
	// containerd's Windows differ chain, ["windows", "windows-lcow"], stays:
	// a default set here would replace it (dropping windows-lcow, which
	// client-side unpacks of Hyper-V images need). Our differ is reached
	// through the unpack rule.
	if d := lookup(tree, []string{"plugins", "io.containerd.service.v1.diff-service"}); d != nil {
		t.Errorf("diff-service = %v, want it unset so containerd's differ chain stays", d)
	}
	if _, ok := tree["grpc"]; ok {
		t.Error("a fragment must not move containerd's own socket")
	}
	if lookup(tree, []string{"plugins", "io.containerd.shim.v1.manager"}) != nil {
		t.Error("a fragment must not move the shims' sockets")
	}

	// The options table is what the shim decodes.
	body, err := toml.Marshal(lookup(tree, []string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc", "options"}))
	if err != nil {
		t.Fatal(err)
	}
	if o, err := options.Decode(body); err != nil || o != n.Options {
		t.Errorf("shim decodes the options table as %+v, %v; want %+v", o, err, n.Options)
	}
}

func TestGenerateEmulationNode(t *testing.T) {
	out, err := Generate(Node{
		OS: "linux", Root: "/tmp/c/root", State: "/tmp/c/state", Address: "/tmp/c/containerd.sock", ShimSocketDir: "/tmp/c/s", DisablePauseImagePull: true,
		SnapshotterAddress: "/tmp/c/snapshotter.sock", Handler: "winproc-test", Sandboxer: "podsandbox",
		CNIBinDirs: []string{"/tools/cni"}, CNIConfDir: "/tmp/c/net.d", NetNSUnderState: true,
		SnapshotterRoot: "/tmp/c/snapshotter", CRIDefaultSnapshotter: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := toml.Unmarshal(out, &tree); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"root"}, "/tmp/c/root"},
		{[]string{"state"}, "/tmp/c/state"},
		{[]string{"grpc", "address"}, "/tmp/c/containerd.sock"},
		{[]string{"plugins", "io.containerd.shim.v1.manager", "socket_dir"}, "/tmp/c/s"},
		{[]string{"proxy_plugins", "windowsfilter", "address"}, "/tmp/c/snapshotter.sock"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc-test", "sandboxer"}, "podsandbox"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "winproc-test", "disable_pause_image_pull"}, true},
		// podsandbox: containerd makes the pause container from this image.
		{[]string{"plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"}, "registry.k8s.io/pause:3.10"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "cni", "conf_dir"}, "/tmp/c/net.d"},
		// CRI reports the image file system at the snapshotter's root, and
		// counts the usage of its default snapshotter only.
		{[]string{"proxy_plugins", "windowsfilter", "exports", "root"}, "/tmp/c/snapshotter"},
		{[]string{"plugins", "io.containerd.cri.v1.images", "snapshotter"}, "windowsfilter"},
		{[]string{"plugins", "io.containerd.cri.v1.runtime", "netns_mounts_under_state_dir"}, true},
		// Linux NRI would put a linux section in every Windows spec.
		{[]string{"plugins", "io.containerd.nri.v1.nri", "disable"}, true},
	}
	for _, c := range checks {
		if got := lookup(tree, c.path); got != c.want {
			t.Errorf("%s = %#v, want %#v", strings.Join(c.path, "."), got, c.want)
		}
	}
	if dirs, _ := lookup(tree, []string{"plugins", "io.containerd.cri.v1.runtime", "cni", "bin_dirs"}).([]any); len(dirs) != 1 || dirs[0] != "/tools/cni" {
		t.Errorf("cni bin_dirs = %v, want [/tools/cni]", dirs)
	}
	// On Linux no differ of containerd's applies Windows layers: ours goes
	// in front of containerd's Linux chain, ["walking"], which stays whole.
	differs, _ := lookup(tree, []string{"plugins", "io.containerd.service.v1.diff-service", "default"}).([]any)
	if len(differs) != 2 || differs[0] != "windowsfilter-diff" || differs[1] != "walking" {
		t.Errorf("diff-service default on linux = %v, want [windowsfilter-diff walking]", differs)
	}
}

// containerd extracts a pull's layers in parallel only with an unpack
// limiter and a snapshotter with the rebase capability
// (core/unpack/unpacker.go, supportParallel): the emulation gets both,
// Windows neither, and a concurrency of 1 is today's sequential config.
func TestGenerateUnpackConcurrency(t *testing.T) {
	linux := Node{OS: "linux", SnapshotterAddress: "/s.sock", Handler: "winproc", Sandboxer: "shim"}
	for _, tc := range []struct {
		name         string
		node         Node
		capabilities any
		unpacks      any
	}{
		{name: "windows", node: Windows()},
		{name: "windows, sequential", node: func() Node { n := Windows(); n.UnpackConcurrency = 1; return n }()},
		{name: "emulation", node: linux, capabilities: "[rebase]", unpacks: int64(DefaultUnpackConcurrency)},
		{name: "emulation, 6", node: func() Node { n := linux; n.UnpackConcurrency = 6; return n }(), capabilities: "[rebase]", unpacks: int64(6)},
		{name: "emulation, sequential", node: func() Node { n := linux; n.UnpackConcurrency = 1; return n }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Generate(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			var tree map[string]any
			if err := toml.Unmarshal(out, &tree); err != nil {
				t.Fatal(err)
			}
			capabilities := lookup(tree, []string{"proxy_plugins", "windowsfilter", "capabilities"})
			if capabilities != nil {
				capabilities = fmt.Sprint(capabilities)
			}
			if capabilities != tc.capabilities {
				t.Errorf("windowsfilter capabilities = %v, want %v", capabilities, tc.capabilities)
			}
			if got := lookup(tree, []string{"plugins", "io.containerd.transfer.v1.local", "max_concurrent_unpacks"}); got != tc.unpacks {
				t.Errorf("max_concurrent_unpacks = %#v, want %#v", got, tc.unpacks)
			}
			if got := lookup(tree, []string{"proxy_plugins", "windowsfilter-diff", "capabilities"}); got != nil {
				t.Errorf("the differ has capabilities %v", got)
			}
		})
	}
}

func TestGenerateRejects(t *testing.T) {
	good := Windows()
	tests := map[string]func(*Node){
		"no handler":       func(n *Node) { n.Handler = "" },
		"no snapshotter":   func(n *Node) { n.SnapshotterAddress = "" },
		"bad sandboxer":    func(n *Node) { n.Sandboxer = "vm" },
		"bad OS":           func(n *Node) { n.OS = "darwin" },
		"netns on windows": func(n *Node) { n.NetNSUnderState = true },
		// hcsshim imports a layer with its parents: no parallel unpack.
		"parallel unpack on windows":  func(n *Node) { n.UnpackConcurrency = 2 },
		"negative unpack concurrency": func(n *Node) { n.OS, n.UnpackConcurrency = "linux", -1 },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			n := good
			mutate(&n)
			if _, err := Generate(n); err == nil {
				t.Fatal("Generate accepted it")
			}
		})
	}
}

func lookup(tree map[string]any, path []string) any {
	var cur any = tree
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// DefaultHandler makes the handler the CRI's default, the handler of the
// pods that name no RuntimeClass (the node's HostProcess DaemonSets).
func TestGenerateDefaultHandler(t *testing.T) {
	for _, on := range []bool{false, true} {
		n := Windows()
		n.DefaultHandler = on
		out, err := Generate(n)
		if err != nil {
			t.Fatal(err)
		}
		var tree map[string]any
		if err := toml.Unmarshal(out, &tree); err != nil {
			t.Fatal(err)
		}
		got := lookup(tree, []string{"plugins", "io.containerd.cri.v1.runtime", "containerd", "default_runtime_name"})
		if want := any(nil); on {
			want = "winproc"
			if got != want {
				t.Errorf("default_runtime_name = %#v, want %#v", got, want)
			}
		} else if got != want {
			t.Errorf("without DefaultHandler: default_runtime_name = %#v", got)
		}
	}
}
