//go:build linux

package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/winproc/winproc/integration/node"
)

// The generated config must load without complaint and bring up both proxy
// plugins, in containerd as shipped.
func TestGeneratedConfigLoads(t *testing.T) {
	n := node.StartWith(t, bins, node.Options{StockContainerd: true})

	out, err := n.Ctr(context.Background(), "plugins", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`io\.containerd\.snapshotter\.v1\s+windowsfilter\s+windows/amd64\s+ok`),
		regexp.MustCompile(`io\.containerd\.differ\.v1\s+windowsfilter-diff\s+windows/amd64\s+ok`),
	} {
		if !want.MatchString(out) {
			t.Errorf("ctr plugins ls has no line matching %s:\n%s", want, out)
		}
	}

	// Version 3 is what every containerd 2.x reads; 2.4 notes that it
	// migrates it to its own version 4 (which only renames plugins winproc
	// does not configure). Nothing else may be said about the config.
	versionNote := regexp.MustCompile(`Configuration migrated from version 3, use .containerd config migrate.`)
	complaint := regexp.MustCompile(`(?i)level=(warning|error).*(unknown|unrecognized|undecoded|migrat|deprecat|invalid)`)
	for _, line := range strings.Split(n.ContainerdLog(), "\n") {
		if complaint.MatchString(line) && !versionNote.MatchString(line) {
			t.Errorf("containerd complained about the generated config: %s", line)
		}
	}
	out, err = n.Ctr(context.Background(), "deprecations", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		// cgroup v1 is a property of the host, not of the config.
		if !strings.Contains(line, "cgroup-v1") {
			t.Errorf("containerd reports deprecated config use: %s", line)
		}
	}
}
