package winbuild

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// A missing UBR registry value (Wine has none; stripped images may lack it)
// must not stop a node: the revision only orders images of one build, so
// the host counts as revision 0. Other registry failures stay errors.
func TestHostVersionRevision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		read    func() (uint32, error)
		want    Version
		wantErr bool
	}{
		{"revision read", func() (uint32, error) { return 2227, nil }, Version{10, 0, 20348, 2227}, false},
		{"UBR missing", func() (uint32, error) {
			return 0, fmt.Errorf("read `UBR` from registry: %w", os.ErrNotExist)
		}, Version{10, 0, 20348, 0}, false},
		{"registry unreadable", func() (uint32, error) {
			return 0, fmt.Errorf("open `CurrentVersion` registry key: %w", errors.New("the configuration registry database is corrupt"))
		}, Version{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hostVersion(10, 0, 20348, tc.read)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("hostVersion = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
