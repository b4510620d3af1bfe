//go:build linux

package winenode

import (
	"strings"
	"testing"
)

// Windows' limits through the kubelet's Windows path: crictl.exe and
// containerd.exe's Windows CRI, on the shipped shim.exe, in both sandbox
// modes. A command line longer than CreateProcess takes, an environment
// value longer than Windows allows for one variable, and a NUL in the
// environment are refused when the shim is given them (crictl start),
// InvalidArgument, naming the field, in
// an ordinary pod (HCS backend) and a HostProcess pod (job containers);
// the longest value Windows takes reaches the process whole.
func TestCRIBadInputLimits(t *testing.T) {
	for _, sandboxer := range []string{"shim", "podsandbox"} {
		t.Run(sandboxer, func(t *testing.T) { criBadInputLimits(t, sandboxer) })
	}
}

// limitCases are the refusals: CRI config changes and what the error
// names.
var limitCases = []struct {
	name  string
	extra func(program string) map[string]any
	field []string
}{
	{"command line", func(program string) map[string]any {
		return map[string]any{"command": []string{program, "echo", strings.Repeat("x", 32800)}}
	}, []string{"CRI command and args", "CreateProcess takes at most 32766"}},
	{"env value", func(string) map[string]any {
		return map[string]any{"envs": []map[string]string{{"key": "BIG", "value": strings.Repeat("x", 32768)}}}
	}, []string{"(CRI envs)", "BIG", "at most 32767"}},
	{"env NUL", func(string) map[string]any {
		return map[string]any{"envs": []map[string]string{{"key": "NUL", "value": "a\x00b"}}}
	}, []string{"(CRI envs)", "variable", "NUL", "NUL character"}},
}

func criBadInputLimits(t *testing.T, sandboxer string) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: sandboxer, DefaultHandler: true})
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, agentImage, "10.0.17763.1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	logs := t.TempDir()
	podCfg := criJSON(t, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "web", "namespace": "default", "uid": "uid-web"},
		"hostname":      "web",
		"log_directory": WindowsPath(logs),
	})
	hpCfg := criJSON(t, "agents.json", map[string]any{
		"metadata":      map[string]any{"name": "agents", "namespace": "kube-system", "uid": "uid-agents"},
		"log_directory": WindowsPath(logs),
		"windows":       hostProcess(`NT AUTHORITY\SYSTEM`, true),
		"annotations":   inheritUser,
	})
	pod, hp := criRun(t, n, "runp", podCfg), criRun(t, n, "runp", hpCfg)
	kinds := []struct {
		name, pod, config, program string
		base                       func(name string) map[string]any
	}{
		{"ordinary", pod, podCfg, `C:\winproc-testapp.exe`, func(name string) map[string]any {
			return map[string]any{"metadata": map[string]any{"name": name}, "image": map[string]any{"image": appImage}, "log_path": name + ".log"}
		}},
		{"HostProcess", hp, hpCfg, "winproc-testapp.exe", func(name string) map[string]any {
			return map[string]any{"metadata": map[string]any{"name": name}, "image": map[string]any{"image": agentImage}, "log_path": name + ".log",
				"windows": hostProcess(`NT AUTHORITY\SYSTEM`, false), "annotations": inheritUser}
		}},
	}
	for _, k := range kinds {
		for _, tc := range limitCases {
			t.Run(k.name+" "+tc.name, func(t *testing.T) {
				name := strings.ReplaceAll(tc.name, " ", "-")
				cfg := k.base(name)
				cfg["command"] = []string{k.program, "env"}
				for key, v := range tc.extra(k.program) {
					cfg[key] = v
				}
				// containerd.exe's CRI records the container at create;
				// the shim is given it at start.
				c := criRun(t, n, "create", k.pod, criJSON(t, name+".json", cfg), k.config)
				// Removed whatever the start did; checkNothingLeft sees what is left.
				defer n.Crictl("rm", "-f", c)
				_, errOut, err := n.Crictl("start", c)
				if err == nil {
					criRun(t, n, "stop", c)
					t.Fatal("start accepted the container")
				}
				if !strings.Contains(errOut, "code = InvalidArgument") {
					t.Errorf("the refusal is not InvalidArgument:\n%.2000s", errOut)
				}
				for _, f := range tc.field {
					if !strings.Contains(errOut, f) {
						t.Errorf("the refusal does not name %q:\n%.2000s", f, errOut)
					}
				}
			})
		}
		// The longest value Windows takes reaches the process whole.
		cfg := k.base("longest")
		cfg["command"] = []string{k.program, "env"}
		long := strings.Repeat("y", 32767)
		cfg["envs"] = []map[string]string{{"key": "LONGEST", "value": long}}
		c := criRun(t, n, "create", k.pod, criJSON(t, "longest.json", cfg), k.config)
		criRun(t, n, "start", c)
		if code := exitCode(t, n, c); code != 0 {
			t.Errorf("%s: the container exited %d", k.name, code)
		}
		// crictl logs joins the lines containerd.exe split (16 KiB each).
		if got := envValue(criRun(t, n, "logs", c), "LONGEST"); len(got) != len(long) {
			t.Errorf("%s: the process saw LONGEST with %d characters, want %d", k.name, len(got), len(long))
		}
		criRun(t, n, "rm", c)
	}
	criRun(t, n, "stopp", pod, hp)
	criRun(t, n, "rmp", pod, hp)
	n.checkNothingLeft()
}
