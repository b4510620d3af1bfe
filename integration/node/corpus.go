//go:build linux

package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CorpusPod is a pod of the differential corpus: its name and what it adds
// to a plain pod's CRI config.
type CorpusPod struct {
	Name  string
	Extra map[string]any
}

// CorpusContainer is a container of the differential corpus: its name and
// what it adds to a container's CRI config.
type CorpusContainer struct {
	Name  string
	Extra func() map[string]any
}

const corpusGMSA = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-1","MachineAccountName":"webapp01","Guid":"244818ae-87ca-4fcd-92ec-e79e5252348a","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"}]}}`

// CorpusPods are the pod configs of the HCS document's differential
// corpus (shim/hcs document_oracle_test.go): what each adds to a plain
// pod's CRI config.
var CorpusPods = []CorpusPod{
	{"plain", nil},
	{"annotated", map[string]any{"annotations": map[string]string{"io.microsoft.container.memory.sizeinmb": "512", "example.com/team": "web"}}},
	{"dns", map[string]any{"dns_config": map[string]any{"servers": []string{"10.0.0.10", "10.0.0.11"}, "searches": []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}, "options": []string{"ndots:5"}}}},
	{"no-dns", map[string]any{"dns_config": map[string]any{}}},
	{"admin", map[string]any{"windows": map[string]any{"security_context": map[string]any{"run_as_username": "ContainerAdministrator"}}}},
	{"unsafe-off", map[string]any{"annotations": map[string]string{"io.microsoft.disable-unsafe-operations": "true"}}},
	{"dumps", map[string]any{"annotations": map[string]string{"io.microsoft.container.processdumplocation": `C:\dumps\{container_id}`, "io.microsoft.wcow.processdumptype": "mini"}}},
}

// CorpusContainers are the container configs of that corpus: what each
// adds to a container's CRI config. hostDir makes a host directory NAME
// for a mount and returns its path; app is the test app's path in the
// container.
func CorpusContainers(hostDir func(name string) string, app string) []CorpusContainer {
	return []CorpusContainer{
		{"app", func() map[string]any { return nil }},
		{"cmdline", func() map[string]any {
			return map[string]any{"command": []string{"cmd", "/c", `echo "quoted arg" & dir C:\`}}
		}},
		{"args", func() map[string]any {
			return map[string]any{"command": []string{app}, "args": []string{"serve", "-addr", "0.0.0.0:8080"}}
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
			return map[string]any{"windows": map[string]any{"security_context": map[string]any{"run_as_username": "NT AUTHORITY\\NETWORK SERVICE", "credential_spec": corpusGMSA}}}
		}},
		{"tty-stdin", func() map[string]any { return map[string]any{"tty": true, "stdin": true} }},
		{"device", func() map[string]any {
			return map[string]any{"devices": []map[string]any{{"host_path": "class/5B45201D-F2F2-4F3B-85BB-30FF1F953599", "container_path": "", "permissions": ""}}}
		}},
	}
}

// CorpusIncludes reports whether corpus container ctr (named name) is made
// in corpus pod pod: every container in the first pod; the app and a third
// of the others in each other pod.
func CorpusIncludes(pod, ctr int, name string) bool {
	return pod == 0 || name == "app" || ctr%3 == pod%3
}

// RuntimeSpec is the OCI spec in `crictl inspect -o json` or `crictl
// inspectp -o json` output.
func RuntimeSpec(inspect []byte) (json.RawMessage, error) {
	var v struct {
		Info struct {
			RuntimeSpec json.RawMessage `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal(inspect, &v); err != nil {
		return nil, err
	}
	if len(v.Info.RuntimeSpec) == 0 {
		return nil, errors.New("no runtime spec")
	}
	return v.Info.RuntimeSpec, nil
}

// corpusNamespace stands for a pod's network namespace in the corpus: the
// node's (a Linux netns path, or the HCN stand-in's GUID) varies by run.
const corpusNamespace = "5d4c2b3a-1f0e-4d9c-8b7a-6e5f4d3c2b1a"

// WriteCorpusSpec writes spec, its host paths already rewritten by the
// caller, to dir/name.json, indented, with the network namespace
// corpusNamespace.
func WriteCorpusSpec(dir, name, spec string) error {
	var v map[string]any
	if err := json.Unmarshal([]byte(spec), &v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if w, ok := v["windows"].(map[string]any); ok {
		if nw, ok := w["network"].(map[string]any); ok && nw["networkNamespace"] != nil {
			nw["networkNamespace"] = corpusNamespace
		}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644)
}
