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
			r := Run(context.Background(), o)
			c := r.Check(CheckUnpack)
			if c == nil {
				t.Fatalf("no %s check", CheckUnpack)
			}
			if c.Status != tc.status || !strings.Contains(c.Summary, tc.summary) {
				t.Errorf("%s %q\nwant %s %q", c.Status, c.Summary, tc.status, tc.summary)
			}
			if fix := strings.Join(c.Fix, "\n"); !strings.Contains(fix, tc.fix) {
				t.Errorf("fix:\n%s\nlacks:\n%s", fix, tc.fix)
			}
		})
	}
}
