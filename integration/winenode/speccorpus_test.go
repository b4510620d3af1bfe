//go:build linux

package winenode

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/winproc/winproc/integration/node"
)

// corpusEnv names the directory TestWriteWindowsCRISpecCorpus writes to;
// `make spec-corpus` sets it to shim/hcs/testdata/corpus-wincri.
const corpusEnv = "WINPROC_WRITE_WINCRI_SPEC_CORPUS"

// TestWriteWindowsCRISpecCorpus writes the OCI specs containerd.exe's own
// Windows CRI makes for the differential corpus's pods and containers
// (node.CorpusPods, node.CorpusContainers), the second corpus of the HCS
// document's differential test (shim/hcs document_oracle_test.go). The
// first is the emulated node's Linux CRI's. Podsandbox mode, so that the
// CRI makes the pause container's spec too; containers are created only,
// as a kubelet's would be before they start.
//
// Host paths (the node's temporary directories, Z:\tmp\...) become
// C:\hostdata\NAME, and the HCN stand-in's namespace GUID a fixed one, as
// in the first corpus; nothing else is rewritten.
func TestWriteWindowsCRISpecCorpus(t *testing.T) {
	dir := os.Getenv(corpusEnv)
	if dir == "" {
		t.Skipf("%s is not set: `make spec-corpus` writes the corpus", corpusEnv)
	}
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "podsandbox", DefaultHandler: true})
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	node.WriteCorpus(t, node.CorpusWriter{
		Dir: dir,
		CRI: corpusCRI{n},
		App: `C:\winproc-testapp.exe`,
		MakeHostDir: func(t *testing.T, name string) string {
			d := filepath.Join(t.TempDir(), name)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return WindowsPath(d)
		},
		Rewrite: volumePath,
		// Wine has no virtual disks: the snapshotter cannot grow a
		// scratch's sandbox.vhdx to a rootfs size here.
		Skip: func(name string) bool { return name == "rootfs-size" },
		Envs: []map[string]string{{"key": "GREETING", "value": "from CRI"}},
	})
}

// volumePath rewrites host path host (Z:\tmp\...) into win where spec
// names it by its final path: containerd.exe gives a mount's source so,
// which Wine names on its Z: volume, \\?\Volume{...}\tmp\...
func volumePath(spec, host, win string) string {
	esc := func(p string) string { return strings.ReplaceAll(p, `\`, `\\`) }
	final := regexp.MustCompile(regexp.QuoteMeta(esc(`\\?\Volume{`)) + `[0-9a-fA-F-]+` + regexp.QuoteMeta(esc(`}`+strings.TrimPrefix(host, "Z:"))))
	return final.ReplaceAllLiteralString(spec, esc(win))
}

// corpusCRI is containerd.exe's Windows CRI, through crictl.exe.
type corpusCRI struct{ n *Node }

func (c corpusCRI) RunPod(t *testing.T, p node.CorpusPod) (string, string) {
	cfg := map[string]any{
		"metadata":      map[string]any{"name": "corpus-" + p.Name, "namespace": "default", "uid": "uid-corpus-" + p.Name},
		"hostname":      "corpus-" + p.Name,
		"log_directory": WindowsPath(t.TempDir()),
		"dns_config":    map[string]any{"servers": []string{"10.0.0.10"}, "searches": []string{"default.svc.cluster.local"}},
	}
	for k, v := range p.Extra {
		cfg[k] = v
	}
	podCfg := criJSON(t, p.Name+"-pod.json", cfg)
	return criRun(t, c.n, "runp", podCfg), podCfg
}

func (c corpusCRI) CreateContainer(t *testing.T, pod, podConfig, name string, extra map[string]any) string {
	return criCreatePod(t, c.n, pod, podConfig, name, extra)
}

func (c corpusCRI) Inspect(t *testing.T, verb, id string) []byte {
	return []byte(criRun(t, c.n, verb, "-o", "json", id))
}

func (c corpusCRI) RemoveContainer(t *testing.T, id string) { criRun(t, c.n, "rm", id) }

func (c corpusCRI) RemovePod(t *testing.T, id string) {
	criRun(t, c.n, "stopp", id)
	criRun(t, c.n, "rmp", id)
}
