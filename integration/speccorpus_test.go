//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/winproc/winproc/integration/node"
)

// corpusEnv names the directory TestWriteSpecCorpus writes to; `make
// spec-corpus` sets it to shim/hcs/testdata/corpus.
const corpusEnv = "WINPROC_WRITE_SPEC_CORPUS"

// TestWriteSpecCorpus writes the OCI specs containerd's CRI makes for
// realistic Windows pods and containers, the corpus of the HCS document's
// differential test (shim/hcs/document_oracle_test.go). The CRI is the
// emulated node's containerd-wincri, whose Windows spec code is
// containerd's own (buildWindowsSpec and the Windows spec options), in
// podsandbox mode so that the CRI also makes the pause container's spec.
// CreateContainer only records a container, so specs winproc's emulation
// could not run (gMSA, devices) are made too.
//
// Two things of a Linux node are rewritten into what a Windows node has, and
// nothing else: host paths (the node's temporary directories) become
// C:\hostdata\NAME, and the network namespace (a Linux netns path) becomes an
// HNS namespace GUID.
func TestWriteSpecCorpus(t *testing.T) {
	dir := os.Getenv(corpusEnv)
	if dir == "" {
		t.Skipf("%s is not set: `make spec-corpus` writes the corpus", corpusEnv)
	}
	n := node.StartWith(t, bins, node.Options{Sandboxer: "podsandbox"})
	importPodImages(t, n)
	node.WriteCorpus(t, node.CorpusWriter{
		Dir: dir,
		CRI: corpusCRI{n},
		App: testApp,
		MakeHostDir: func(t *testing.T, name string) string {
			d := filepath.Join(t.TempDir(), name)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		},
	})
}

// corpusCRI is the emulated node's CRI, through crictl.
type corpusCRI struct{ n *node.Node }

func (c corpusCRI) RunPod(t *testing.T, p node.CorpusPod) (string, string) {
	cfgMap := podSpec(t, "corpus-"+p.Name, false)
	for k, v := range p.Extra {
		cfgMap[k] = v
	}
	podCfg := writeJSON(t, p.Name+"-pod.json", cfgMap)
	return runPodWith(t, c.n, p.Name, podCfg), podCfg
}

func (c corpusCRI) CreateContainer(t *testing.T, pod, podConfig, name string, extra map[string]any) string {
	return lastLine(crictl(t, c.n, "create", pod, containerConfig(t, name, testAppImage, nil, extra), podConfig))
}

func (c corpusCRI) Inspect(t *testing.T, verb, id string) []byte {
	out := crictl(t, c.n, verb, "-o", "json", id)
	return []byte(out[strings.Index(out, "{"):])
}

func (c corpusCRI) RemoveContainer(t *testing.T, id string) { crictl(t, c.n, "rm", id) }

// RemovePod leaves the pod to runPodWith's clean-up.
func (c corpusCRI) RemovePod(*testing.T, string) {}
