package doctor

import (
	"context"
	"strings"
	"testing"

	"github.com/winproc/winproc/containerdconfig"
)

// The unpack check against the configs a node really has. containerd's
// Windows differ chain is ["windows", "windows-lcow"]
// (plugins/services/diff/service_windows.go) and its Linux one ["walking"];
// a diff-service default that leaves one of them out breaks client-side
// unpacks for containerd's own snapshotters, while winproc's differ is
// reached through the unpack rule (and, on Linux, where no differ of
// containerd's applies Windows layers, must be in the chain too).
func TestDoctorUnpackConfigs(t *testing.T) {
	windowsNode := containerdconfig.Windows()
	windowsNode.Address = `\\.\pipe\containerd-containerd`
	windowsConfig := generated(t, windowsNode)
	withDiff := func(config, chain string) string {
		return config + "\n  [plugins.'io.containerd.service.v1.diff-service']\n    default = " + chain + "\n"
	}
	for _, tc := range []struct {
		name         string
		goos         string
		config       func(linux string) string
		status       Status
		summary, fix string
		notInSummary string
	}{
		{name: "generated windows node", goos: "windows", config: func(string) string { return windowsConfig },
			status: OK, summary: "windows/amd64 layers unpack with windowsfilter-diff into windowsfilter; the diff service keeps containerd's chain (windows, windows-lcow)"},
		{name: "windows node with the old chain", goos: "windows", config: func(string) string { return withDiff(windowsConfig, "['windowsfilter-diff', 'windows']") },
			status: Warn, summary: `the diff service default ["windowsfilter-diff" "windows"] leaves out containerd's windows-lcow`,
			fix: `remove default from [plugins.'io.containerd.service.v1.diff-service'] (containerd's own chain is ["windows" "windows-lcow"])`},
		{name: "windows node with ours in front of containerd's chain", goos: "windows", config: func(string) string {
			return withDiff(windowsConfig, "['windowsfilter-diff', 'windows', 'windows-lcow']")
		}, status: OK, summary: "the diff service tries windowsfilter-diff, windows, windows-lcow"},
		{name: "generated emulation node", goos: "linux", config: func(linux string) string { return linux },
			status: OK, summary: "the diff service tries windowsfilter-diff, walking"},
		{name: "emulation node without our differ", goos: "linux", config: func(linux string) string {
			return strings.Replace(linux, "default = ['windowsfilter-diff', 'walking']", "default = ['walking']", 1)
		}, status: Warn, summary: "the diff service does not try windowsfilter-diff",
			fix: `set in [plugins.'io.containerd.service.v1.diff-service']: default = ["windowsfilter-diff", "walking"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, o := healthy(t)
			s.goos = tc.goos
			s.files["/etc/containerd/config.toml"] = tc.config(s.files["/etc/containerd/config.toml"])
			checkFinding(t, Run(context.Background(), o), CheckUnpack, tc.status, tc.summary, tc.fix)
		})
	}
}

// Whether containerd extracts a pull's layers in parallel: off Windows the
// generated config lets it (the rebase capability and an unpack limiter),
// and a config that does not, or whose CRI pulls bypass the transfer
// service, is told how; on Windows the capability makes every pull fail.
func TestDoctorParallelUnpack(t *testing.T) {
	windowsNode := containerdconfig.Windows()
	windowsNode.Address = `\\.\pipe\containerd-containerd`
	windowsConfig := generated(t, windowsNode)
	images := "[plugins.'io.containerd.cri.v1.images']"
	withImages := func(config, setting string) string {
		return strings.Replace(config, images, images+"\n    "+setting, 1)
	}
	sequential := func(linux string) string {
		linux = strings.Replace(linux, "capabilities = ['rebase']", "", 1)
		return strings.Replace(linux, "max_concurrent_unpacks = 3", "", 1)
	}
	for _, tc := range []struct {
		name         string
		goos         string
		config       func(linux string) string
		status       Status
		summary, fix string
	}{
		{name: "generated emulation node", goos: "linux", config: func(linux string) string { return linux },
			status: OK, summary: "up to 3 layers at a time"},
		{name: "sequential emulation node", goos: "linux", config: sequential,
			status: Warn, summary: `containerd unpacks a pull's layers one after another: [proxy_plugins.windowsfilter] lacks the "rebase" capability and [plugins.'io.containerd.transfer.v1.local'] has max_concurrent_unpacks = 1`,
			fix: "set capabilities = [\"rebase\"] in [proxy_plugins.windowsfilter]\nset max_concurrent_unpacks = 3 in [plugins.'io.containerd.transfer.v1.local'], then"},
		{name: "no unpack limiter", goos: "linux", config: func(linux string) string {
			return strings.Replace(linux, "max_concurrent_unpacks = 3", "max_concurrent_unpacks = 1", 1)
		}, status: Warn, summary: "has max_concurrent_unpacks = 1", fix: "set max_concurrent_unpacks = 3"},
		{name: "CRI pulls with the client", goos: "linux", config: func(linux string) string { return withImages(linux, "use_local_image_pull = true") },
			status: Warn, summary: "CRI pulls bypass the transfer service (use_local_image_pull = true)", fix: "remove it from [plugins.'io.containerd.cri.v1.images']"},
		{name: "CRI falls back to the client", goos: "linux", config: func(linux string) string { return withImages(linux, "max_concurrent_downloads = 6") },
			status: Warn, summary: "CRI pulls bypass the transfer service (max_concurrent_downloads = 6)"},
		{name: "snapshot annotations on linux", goos: "linux", config: func(linux string) string { return withImages(linux, "disable_snapshot_annotations = false") },
			status: Warn, summary: "(disable_snapshot_annotations = false)"},
		{name: "generated windows node", goos: "windows", config: func(string) string { return windowsConfig },
			status: OK, summary: "one layer at a time (hcsshim imports a layer with its parents)"},
		{name: "windows node with rebase", goos: "windows", config: func(string) string {
			return strings.Replace(windowsConfig, "[proxy_plugins.windowsfilter]", "[proxy_plugins.windowsfilter]\n  capabilities = ['rebase']", 1)
		}, status: Fail, summary: `[proxy_plugins.windowsfilter] lists the "rebase" capability`, fix: `remove "rebase" from capabilities in [proxy_plugins.windowsfilter]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, o := healthy(t)
			s.goos = tc.goos
			s.files["/etc/containerd/config.toml"] = tc.config(s.files["/etc/containerd/config.toml"])
			checkFinding(t, Run(context.Background(), o), CheckUnpack, tc.status, tc.summary, tc.fix)
		})
	}
}
