package doctor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/emulation"
)

// localLeftovers are the Linux emulation's: its systems under
// <containerd state>/winproc-emulation/<namespace>/.
func localLeftovers() Leftovers { return emulationLeftovers{} }

type emulationLeftovers struct{}

func (emulationLeftovers) Where(state string) string { return "under " + state }

func (emulationLeftovers) Find(ctx context.Context, state string, tasks func(string) ([]string, error)) ([]Orphan, error) {
	root := filepath.Join(state, containerdnames.EmulationStateDir)
	namespaces, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Orphan
	for _, ns := range namespaces {
		if !ns.IsDir() {
			continue
		}
		var hasTask func(string) bool
		if ids, err := tasks(ns.Name()); err == nil {
			hasTask = func(id string) bool { return slices.Contains(ids, id) }
		}
		found, err := emulation.FindOrphans(filepath.Join(root, ns.Name()), hasTask)
		if err != nil {
			return nil, err
		}
		for _, o := range found {
			out = append(out, Orphan{Namespace: ns.Name(), ID: o.ID, Dir: o.Dir, Why: o.Why, Mounts: o.Mounts, Cgroup: o.Cgroup, Processes: o.Processes})
		}
	}
	return out, nil
}

func (emulationLeftovers) Remove(ctx context.Context, state string, o Orphan) error {
	root := filepath.Join(state, containerdnames.EmulationStateDir, o.Namespace)
	return emulation.RemoveOrphan(ctx, root, emulation.Orphan{ID: o.ID, Dir: o.Dir, Why: o.Why, Mounts: o.Mounts, Cgroup: o.Cgroup, Processes: o.Processes})
}
