//go:build linux

package winenode

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/winproc/winproc/integration/node"
)

// kubeletCorpusEnv names the directory TestKubeletStaticPods writes the
// third corpus of the HCS document's differential test to (shim/hcs
// document_oracle_test.go); `make spec-corpus` sets it to
// shim/hcs/testdata/corpus-kubelet.
const kubeletCorpusEnv = "WINPROC_WRITE_KUBELET_SPEC_CORPUS"

// volumeRoot is a volume's root as containerd.exe resolves a mount's
// source to its final path, JSON-escaped.
var volumeRoot = regexp.MustCompile(`\\\\\\\\\?\\\\Volume\{[0-9a-fA-F-]+\}\\\\`)

// writeKubeletCorpus writes the OCI specs containerd.exe made for the
// ordinary static pod p (its sandbox's and its containers', as the
// kubelet asked for them) to the directory kubeletCorpusEnv names, if it
// is set: pod-NAME.json, ctr-NAME-CONTAINER.json. A mount's source named
// through its volume (the kubelet's termination log, its hostPath
// volumes) becomes its C:\ path, and the network namespace the corpus's;
// nothing else is rewritten.
func writeKubeletCorpus(t *testing.T, n *Node, p *staticPod) {
	dir := os.Getenv(kubeletCorpusEnv)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pods := strings.Fields(criRun(t, n, "pods", "-q", "--name", p.podName(), "--namespace", p.namespace))
	if len(pods) != 1 {
		t.Fatalf("crictl pods of %s: %v", p.podName(), pods)
	}
	write := func(name, verb, id string) {
		spec, err := node.RuntimeSpec([]byte(criRun(t, n, verb, "-o", "json", id)))
		if err != nil {
			t.Fatalf("crictl %s %s: %v", verb, id, err)
		}
		s := volumeRoot.ReplaceAllLiteralString(string(spec), `C:\\`)
		if err := node.WriteCorpusSpec(dir, name, s); err != nil {
			t.Fatal(err)
		}
	}
	write("pod-"+p.name, "inspectp", pods[0])
	for _, c := range strings.Fields(criRun(t, n, "ps", "-a", "-q", "--pod", pods[0])) {
		var meta struct {
			Status struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"status"`
		}
		if out := criRun(t, n, "inspect", "-o", "json", c); json.Unmarshal([]byte(out), &meta) != nil {
			t.Fatalf("crictl inspect %s:\n%s", c, out)
		}
		write("ctr-"+p.name+"-"+meta.Status.Metadata.Name, "inspect", c)
	}
	t.Logf("wrote the specs of %s to %s", p.podName(), dir)
}
