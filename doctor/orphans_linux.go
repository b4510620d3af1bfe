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
	var out []Orphan
	err := eachNamespace(state, func(ns, root string) error {
		var hasTask func(string) bool
		if ids, err := tasks(ns); err == nil {
			hasTask = func(id string) bool { return slices.Contains(ids, id) }
		}
		found, err := emulation.FindOrphans(root, hasTask)
		for _, o := range found {
			out = append(out, Orphan{Namespace: ns, ID: o.ID, Dir: o.Dir, Why: o.Why, Mounts: o.Mounts, Cgroup: o.Cgroup, Processes: o.Processes})
		}
		return err
	})
	return out, err
}

// eachNamespace calls f with each namespace's emulation root,
// <containerd state>/winproc-emulation/<namespace>/, until f fails.
func eachNamespace(state string, f func(ns, root string) error) error {
	root := filepath.Join(state, containerdnames.EmulationStateDir)
	namespaces, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		if !ns.IsDir() {
			continue
		}
		if err := f(ns.Name(), filepath.Join(root, ns.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (emulationLeftovers) Remove(ctx context.Context, state string, o Orphan) error {
	root := filepath.Join(state, containerdnames.EmulationStateDir, o.Namespace)
	return emulation.RemoveOrphan(ctx, root, emulation.Orphan{ID: o.ID, Dir: o.Dir, Why: o.Why, Mounts: o.Mounts, Cgroup: o.Cgroup, Processes: o.Processes})
}
