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
		var v map[string]any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w, ok := v["windows"].(map[string]any); ok {
			if nw, ok := w["network"].(map[string]any); ok && nw["networkNamespace"] != nil {
				nw["networkNamespace"] = "5d4c2b3a-1f0e-4d9c-8b7a-6e5f4d3c2b1a"
			}
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		written = append(written, name)
	}
	runtimeSpec := func(verb, id string) json.RawMessage {
		var v struct {
			Info struct {
				RuntimeSpec json.RawMessage `json:"runtimeSpec"`
			} `json:"info"`
		}
		crictlJSON(t, n, &v, verb, "-o", "json", id)
		if len(v.Info.RuntimeSpec) == 0 {
			t.Fatalf("crictl %s %s shows no runtime spec", verb, id)
		}
		return v.Info.RuntimeSpec
	}

	const gmsa = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-1","MachineAccountName":"webapp01","Guid":"244818ae-87ca-4fcd-92ec-e79e5252348a","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"}]}}`
	pods := []struct {
		name  string
		extra map[string]any
	}{
		{"plain", nil},
		{"annotated", map[string]any{"annotations": map[string]string{"io.microsoft.container.memory.sizeinmb": "512", "example.com/team": "web"}}},
		{"dns", map[string]any{"dns_config": map[string]any{"servers": []string{"10.0.0.10", "10.0.0.11"}, "searches": []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}, "options": []string{"ndots:5"}}}},
		{"no-dns", map[string]any{"dns_config": map[string]any{}}},
		{"admin", map[string]any{"windows": map[string]any{"security_context": map[string]any{"run_as_username": "ContainerAdministrator"}}}},
		{"unsafe-off", map[string]any{"annotations": map[string]string{"io.microsoft.disable-unsafe-operations": "true"}}},
		{"dumps", map[string]any{"annotations": map[string]string{"io.microsoft.container.processdumplocation": `C:\dumps\{container_id}`, "io.microsoft.wcow.processdumptype": "mini"}}},
	}
	type ctr struct {
		name  string
		extra func() map[string]any
	}
	ctrs := []ctr{
		{"app", func() map[string]any { return nil }},
		{"cmdline", func() map[string]any {
			return map[string]any{"command": []string{"cmd", "/c", `echo "quoted arg" & dir C:\`}}
		}},
		{"args", func() map[string]any {
			return map[string]any{"command": []string{testApp}, "args": []string{"serve", "-addr", "0.0.0.0:8080"}}
		}},
		{"env-workdir-user", func() map[string]any {
			return map[string]any{
				"envs":        []map[string]string{{"key": "A", "value": "1"}, {"key": "PATH", "value": `C:\app;C:\Windows\system32`}, {"key": "EMPTY", "value": ""}},
				"working_dir": `C:\app`,
				"windows":     map[string]any{"security_context": map[string]any{"run_as_username": "ContainerUser"}},
			}
		}},
		// Windows names are case-insensitive; containerd compares them
		// as they are, so both spellings reach the spec.
		{"env-case", func() map[string]any {
			return map[string]any{"envs": []map[string]string{{"key": "Path", "value": `C:\app`}, {"key": "PATH", "value": `C:\Windows`}, {"key": "GREETING", "value": ""}}}
		}},
		{"mounts", func() map[string]any {
			return map[string]any{"mounts": []map[string]any{
				{"container_path": `C:\config`, "host_path": hostDir("config"), "readonly": true},
				{"container_path": `C:\data`, "host_path": hostDir("data")},
				{"container_path": `D:`, "host_path": hostDir("ddrive")},
			}}
		}},
		{"mount-propagation", func() map[string]any {
			return map[string]any{"mounts": []map[string]any{
				{"container_path": `C:\logs`, "host_path": hostDir("logs"), "propagation": 0},
				{"container_path": `c:\cache\`, "host_path": hostDir("cache"), "readonly": false},
			}}
		}},
		{"cpu-count", func() map[string]any {
			return map[string]any{"windows": map[string]any{"resources": map[string]any{"cpu_count": 1}}}
		}},
		{"cpu-count-over", func() map[string]any {
			return map[string]any{"windows": map[string]any{"resources": map[string]any{"cpu_count": 64}}}
		}},
		{"cpu-maximum-memory", func() map[string]any {
			return map[string]any{"windows": map[string]any{"resources": map[string]any{"cpu_maximum": 2500, "memory_limit_in_bytes": 256 << 20}}}
		}},
		{"cpu-shares", func() map[string]any {
			return map[string]any{"windows": map[string]any{"resources": map[string]any{"cpu_shares": 512, "memory_limit_in_bytes": 1 << 30}}}
		}},
		{"memory-odd", func() map[string]any {
			return map[string]any{"windows": map[string]any{"resources": map[string]any{"memory_limit_in_bytes": 100*(1<<20) + 4096}}}
		}},
		{"rootfs-size", func() map[string]any {
			return map[string]any{"windows": map[string]any{"resources": map[string]any{"rootfs_size_in_bytes": 40 << 30}}}
		}},
		{"affinity", func() map[string]any {
			return map[string]any{"windows": map[string]any{"resources": map[string]any{"cpu_count": 1, "affinity_cpus": []map[string]any{{"cpu_mask": 1, "cpu_group": 0}}}}}
		}},
		{"annotations", func() map[string]any {
			return map[string]any{"annotations": map[string]string{
				"io.microsoft.container.processor.weight":             "300",
				"io.microsoft.container.memory.sizeinmb":              "768",
				"io.microsoft.container.storage.qos.iopsmaximum":      "1000",
				"io.microsoft.container.storage.qos.bandwidthmaximum": "10485760",
			}}
		}},
		// A container's gMSA (the emulation cannot run a pause container
		// with one, so no pod has it).
		{"gmsa", func() map[string]any {
			return map[string]any{"windows": map[string]any{"security_context": map[string]any{"run_as_username": "NT AUTHORITY\\NETWORK SERVICE", "credential_spec": gmsa}}}
		}},
		{"tty-stdin", func() map[string]any { return map[string]any{"tty": true, "stdin": true} }},
		{"device", func() map[string]any {
			return map[string]any{"devices": []map[string]any{{"host_path": "class/5B45201D-F2F2-4F3B-85BB-30FF1F953599", "container_path": "", "permissions": ""}}}
		}},
	}
	for pi, p := range pods {
		cfgMap := podSpec(t, "corpus-"+p.name, false)
		for k, v := range p.extra {
			cfgMap[k] = v
		}
		podCfg := writeJSON(t, p.name+"-pod.json", cfgMap)
		pod := runPodWith(t, n, p.name, podCfg)
		write("pod-"+p.name, runtimeSpec("inspectp", pod))
		// Every container in the plain pod; the app and a third of the
		// others in each other pod.
		for i, c := range ctrs {
			if pi > 0 && c.name != "app" && i%3 != pi%3 {
				continue
			}
			name := fmt.Sprintf("%s-%s", p.name, c.name)
			extra := c.extra()
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
