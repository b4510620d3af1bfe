//go:build linux

package node

import (
	"fmt"
	"strings"
	"testing"
)

// CorpusCRI is a node's CRI as WriteCorpus drives it: crictl on the
// emulated node, crictl.exe beneath containerd.exe on the Windows node
// under Wine.
type CorpusCRI interface {
	// RunPod runs corpus pod p and returns its id and its config's file.
	RunPod(t *testing.T, p CorpusPod) (id, config string)
	// CreateContainer creates, and does not start, container name in pod
	// with what extra adds to a container's config; it returns its id.
	CreateContainer(t *testing.T, pod, podConfig, name string, extra map[string]any) string
	// Inspect is `crictl VERB -o json ID`'s output, VERB inspect or
	// inspectp.
	Inspect(t *testing.T, verb, id string) []byte
	// RemoveContainer removes a container WriteCorpus created.
	RemoveContainer(t *testing.T, id string)
	// RemovePod stops and removes a pod RunPod ran, or leaves it to the
	// test's clean-up.
	RemovePod(t *testing.T, id string)
}

// CorpusWriter is what a node's corpus differs by.
type CorpusWriter struct {
	// Dir is the directory the specs are written to.
	Dir string
	CRI CorpusCRI
	// App is the test app's path in its image, the containers' command.
	App string
	// MakeHostDir makes host directory name for a mount and returns its
	// path as a container's config names it.
	MakeHostDir func(t *testing.T, name string) string
	// Rewrite, if set, rewrites other spellings of host path host in spec
	// (JSON) into win, beside the path itself.
	Rewrite func(spec, host, win string) string
	// Skip, if set, leaves out the corpus containers it names.
	Skip func(name string) bool
	// Envs, if set, are the variables of a container whose corpus config
	// names none.
	Envs []map[string]string
}

// WriteCorpus writes the OCI specs the node's CRI makes for the
// differential corpus's pods and containers (CorpusPods, CorpusContainers)
// to w.Dir: pod-POD.json, ctr-POD-CONTAINER.json. A host directory's path
// becomes C:\hostdata\NAME, and the network namespace corpusNamespace;
// nothing else is rewritten.
func WriteCorpus(t *testing.T, w CorpusWriter) {
	hostDirs := map[string]string{}
	hostDir := func(name string) string {
		p := w.MakeHostDir(t, name)
		hostDirs[p] = `C:\hostdata\` + name
		return p
	}
	written := 0
	write := func(name, verb, id string) {
		spec, err := RuntimeSpec(w.CRI.Inspect(t, verb, id))
		if err != nil {
			t.Fatalf("crictl %s %s: %v", verb, id, err)
		}
		s := string(spec)
		for host, win := range hostDirs {
			s = strings.ReplaceAll(s, jsonEscape(host), jsonEscape(win))
			if w.Rewrite != nil {
				s = w.Rewrite(s, host, win)
			}
		}
		if err := WriteCorpusSpec(w.Dir, name, s); err != nil {
			t.Fatal(err)
		}
		written++
	}
	ctrs := CorpusContainers(hostDir, w.App)
	for pi, p := range CorpusPods {
		pod, podConfig := w.CRI.RunPod(t, p)
		write("pod-"+p.Name, "inspectp", pod)
		for i, c := range ctrs {
			if !CorpusIncludes(pi, i, c.Name) || (w.Skip != nil && w.Skip(c.Name)) {
				continue
			}
			name := fmt.Sprintf("%s-%s", p.Name, c.Name)
			id := w.CRI.CreateContainer(t, pod, podConfig, name, w.extra(c))
			write("ctr-"+name, "inspect", id)
			w.CRI.RemoveContainer(t, id)
		}
		w.CRI.RemovePod(t, pod)
	}
	t.Logf("wrote %d specs to %s", written, w.Dir)
}

// extra is what corpus container c adds to a container's config, with the
// test app serving as its command and w.Envs as its variables where c
// names none.
func (w CorpusWriter) extra(c CorpusContainer) map[string]any {
	extra := c.Extra()
	if extra == nil {
		extra = map[string]any{}
	}
	if _, ok := extra["command"]; !ok {
		extra["command"] = []string{w.App, "serve"}
	}
	if _, ok := extra["envs"]; !ok && w.Envs != nil {
		extra["envs"] = w.Envs
	}
	return extra
}

// jsonEscape is path s as a JSON string holds it: its backslashes doubled.
func jsonEscape(s string) string {
	return strings.ReplaceAll(s, `\`, `\\`)
}
