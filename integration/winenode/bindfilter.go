//go:build linux

package winenode

import (
	"errors"
	"io/fs"
	"os"
)

// BindFilterBootFile is the stand-in bind filter's boot file
// (testdata/standins/bindfltapi.c): while it is missing, the next call
// into the stand-in, from any process, drops every mapping, as a reboot
// drops the bind filter's.
const BindFilterBootFile = `C:\ProgramData\winproc-standins\bindflt-boot`

// RebootBindFilter simulates a reboot of the node as the bind filter sees
// one: its mappings are gone.
func (n *Node) RebootBindFilter() {
	n.t.Helper()
	if err := os.Remove(n.Path(BindFilterBootFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		n.t.Fatalf("simulate a reboot of the bind filter: %v", err)
	}
}
