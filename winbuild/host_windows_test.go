//go:build windows

package winbuild

import (
	"testing"

	"github.com/Microsoft/hcsshim/osversion"
)

// Host answers with this machine's build, and revision 0 when the registry
// has no UBR value, as under Wine.
func TestHost(t *testing.T) {
	v, err := Host()
	if err != nil {
		t.Fatalf("Host: %v", err)
	}
	os := osversion.Get()
	if v.Major != uint32(os.MajorVersion) || v.Minor != uint32(os.MinorVersion) || v.Build != uint32(os.Build) || v.Build == 0 {
		t.Errorf("Host = %v, want the OS's %s", v, os)
	}
	rev, err := osversion.BuildRevision()
	if err != nil {
		rev = 0
		t.Logf("no UBR value: %v", err)
	}
	if v.Revision != rev {
		t.Errorf("Host revision %d, want the registry's %d", v.Revision, rev)
	}
}
