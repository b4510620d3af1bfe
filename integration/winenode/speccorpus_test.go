//go:build linux

package winenode

import (
	"encoding/json"
	"fmt"
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

	hostDirs := map[string]string{}
	hostDir := func(name string) string {
		d := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		hostDirs[WindowsPath(d)] = `C:\hostdata\` + name
		return WindowsPath(d)
	}
	written := 0
	write := func(name string, spec json.RawMessage) {
		s := string(spec)
		for host, win := range hostDirs {
			esc := func(p string) string { return strings.ReplaceAll(p, `\`, `\\`) }
			s = strings.ReplaceAll(s, esc(host), esc(win))
			// containerd.exe gives a mount's source as its final path,
			// which Wine names on its Z: volume, \\?\Volume{...}\tmp\...
			final := regexp.MustCompile(regexp.QuoteMeta(esc(`\\?\Volume{`)) + `[0-9a-fA-F-]+` + regexp.QuoteMeta(esc(`}`+strings.TrimPrefix(host, "Z:"))))
			s = final.ReplaceAllLiteralString(s, esc(win))
		}
		if err := node.WriteCorpusSpec(dir, name, s); err != nil {
			t.Fatal(err)
		}
		written++
	}
	runtimeSpec := func(verb, id string) json.RawMessage {
		spec, err := node.RuntimeSpec([]byte(criRun(t, n, verb, "-o", "json", id)))
		if err != nil {
			t.Fatalf("crictl %s %s: %v", verb, id, err)
		}
		return spec
	}

	ctrs := node.CorpusContainers(hostDir, `C:\winproc-testapp.exe`)
	for pi, p := range node.CorpusPods {
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
		pod := criRun(t, n, "runp", podCfg)
		write("pod-"+p.Name, runtimeSpec("inspectp", pod))
		// Every container in the plain pod; the app and a third of the
		// others in each other pod.
		for i, c := range ctrs {
			// Wine has no virtual disks: the snapshotter cannot grow a
			// scratch's sandbox.vhdx to a rootfs size here.
			if c.Name == "rootfs-size" || !node.CorpusIncludes(pi, i, c.Name) {
				continue
			}
			name := fmt.Sprintf("%s-%s", p.Name, c.Name)
			extra := c.Extra()
			if extra == nil {
				extra = map[string]any{}
			}
			if _, ok := extra["command"]; !ok {
				extra["command"] = []string{`C:\winproc-testapp.exe`, "serve"}
			}
			if _, ok := extra["envs"]; !ok {
				extra["envs"] = []map[string]string{{"key": "GREETING", "value": "from CRI"}}
			}
			id := criCreatePod(t, n, pod, podCfg, name, extra)
			write("ctr-"+name, runtimeSpec("inspect", id))
			criRun(t, n, "rm", id)
		}
		criRun(t, n, "stopp", pod)
		criRun(t, n, "rmp", pod)
	}
	t.Logf("wrote %d specs to %s", written, dir)
}
