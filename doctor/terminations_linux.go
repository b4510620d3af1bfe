package doctor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/emulation"
)

// localTerminations lists the Linux emulation's pending teardowns under
// <containerd state>/winproc-emulation/<namespace>/.
func localTerminations(state string) ([]Termination, error) {
	root := filepath.Join(state, containerdnames.EmulationStateDir)
	namespaces, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Termination
	for _, ns := range namespaces {
		if !ns.IsDir() {
			continue
		}
		pending, err := emulation.PendingTeardowns(filepath.Join(root, ns.Name()))
		if err != nil {
			return nil, err
		}
		for _, p := range pending {
			out = append(out, Termination{Namespace: ns.Name(), ID: p.ID, Attempts: p.Attempts, LastError: p.LastError, Since: p.Since})
		}
	}
	return out, nil
}
