package doctor

import "github.com/winproc/winproc/shim/emulation"

// localTerminations lists the Linux emulation's pending teardowns under
// <containerd state>/winproc-emulation/<namespace>/.
func localTerminations(state string) ([]Termination, error) {
	var out []Termination
	err := eachNamespace(state, func(ns, root string) error {
		pending, err := emulation.PendingTeardowns(root)
		for _, p := range pending {
			out = append(out, Termination{Namespace: ns, ID: p.ID, Attempts: p.Attempts, LastError: p.LastError, Since: p.Since})
		}
		return err
	})
	return out, err
}
