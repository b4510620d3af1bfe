//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
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

	hostDirs := map[string]string{}
	hostDir := func(name string) string {
		d := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		hostDirs[d] = `C:\hostdata\` + name
		return d
	}
	var written []string
	write := func(name string, spec json.RawMessage) {
		s := string(spec)
		for linux, win := range hostDirs {
			s = strings.ReplaceAll(s, linux, strings.ReplaceAll(win, `\`, `\\`))
		}
		if err := node.WriteCorpusSpec(dir, name, s); err != nil {
			t.Fatal(err)
		}
		written = append(written, name)
	}
	runtimeSpec := func(verb, id string) json.RawMessage {
		out := crictl(t, n, verb, "-o", "json", id)
		spec, err := node.RuntimeSpec([]byte(out[strings.Index(out, "{"):]))
		if err != nil {
			t.Fatalf("crictl %s %s: %v", verb, id, err)
		}
		return spec
	}

	ctrs := node.CorpusContainers(hostDir, testApp)
	for pi, p := range node.CorpusPods {
		cfgMap := podSpec(t, "corpus-"+p.Name, false)
		for k, v := range p.Extra {
			cfgMap[k] = v
		}
		podCfg := writeJSON(t, p.Name+"-pod.json", cfgMap)
		pod := runPodWith(t, n, p.Name, podCfg)
		write("pod-"+p.Name, runtimeSpec("inspectp", pod))
		// Every container in the plain pod; the app and a third of the
		// others in each other pod.
		for i, c := range ctrs {
			if !node.CorpusIncludes(pi, i, c.Name) {
				continue
			}
			name := fmt.Sprintf("%s-%s", p.Name, c.Name)
			extra := c.Extra()
			if extra == nil {
				extra = map[string]any{}
			}
			if _, ok := extra["command"]; !ok {
				extra["command"] = []string{testApp, "serve"}
			}
			id := lastLine(crictl(t, n, "create", pod, containerConfig(t, name, testAppImage, nil, extra), podCfg))
			write("ctr-"+name, runtimeSpec("inspect", id))
			crictl(t, n, "rm", id)
		}
	}
	t.Logf("wrote %d specs to %s", len(written), dir)
}
