//go:build linux

package integration

import (
	"cmp"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/node"
)

// badPod is a pod config that must be refused, by the field named.
type badPod struct {
	name   string
	change func(cfg map[string]any)
	field  []string
}

// badContainer is a container config that must be refused at create, in an
// ordinary pod and, where the field applies, a HostProcess pod.
type badContainer struct {
	name string
	// extra changes the config (see containerConfig); user, when set, is
	// the container's run_as_username.
	extra       map[string]any
	user        string
	hostProcess bool
	field       []string
}

// podSecurity sets the pod's Linux security context field to v.
func podSecurity(field string, v any) func(map[string]any) {
	return func(cfg map[string]any) {
		sc := cfg["linux"].(map[string]any)["security_context"].(map[string]any)
		sc[field] = v
	}
}

var (
	badPods = []badPod{
		// Refused since the pod settings (cri) were written, now in
		// podsandbox mode too.
		{"privileged", podSecurity("privileged", true), []string{"privileged", "linux.security_context.privileged"}},
		{"host pid", podSecurity("namespace_options", map[string]any{"network": 2, "pid": 2}), []string{"spec.hostPID"}},
		{"sysctls", func(cfg map[string]any) {
			cfg["linux"].(map[string]any)["sysctls"] = map[string]string{"net.ipv4.ip_forward": "1"}
		}, []string{"sysctls"}},
		{"run_as_username", func(cfg map[string]any) {
			cfg["windows"] = map[string]any{"security_context": map[string]any{"run_as_username": `a\b\c`}}
		}, []string{"run_as_username", "more than one backslash"}},
		{"forward slash user", func(cfg map[string]any) {
			cfg["windows"] = map[string]any{"security_context": map[string]any{"run_as_username": "NT AUTHORITY/SYSTEM"}}
		}, []string{"run_as_username", "NT AUTHORITY/SYSTEM"}},
		{"HostProcess forward slash user", func(cfg map[string]any) {
			cfg["hostname"] = ""
			cfg["windows"] = hostProcessSecurity("NT AUTHORITY/SYSTEM")
		}, []string{"run_as_username", "NT AUTHORITY/SYSTEM"}},
	}
	badContainers = []badContainer{
		// Windows' limits (internal/validation).
		{name: "command line", extra: map[string]any{"command": []string{testApp, "echo", strings.Repeat("x", 32800)}}, hostProcess: true,
			field: []string{"CRI command and args", "CreateProcess takes at most 32766"}},
		{name: "env value", extra: map[string]any{"envs": []map[string]string{{"key": "BIG", "value": strings.Repeat("x", 32768)}}}, hostProcess: true,
			field: []string{"(CRI envs)", "BIG", "at most 32767"}},
		{name: "env NUL", extra: map[string]any{"envs": []map[string]string{{"key": "NUL", "value": "a\x00b"}}}, hostProcess: true,
			field: []string{"(CRI envs)", "variable", "NUL", "NUL character"}},
		// A user refused at pod level is refused at container level.
		{name: "forward slash user", user: "NT AUTHORITY/SYSTEM", hostProcess: true, field: []string{"run_as_username", "NT AUTHORITY/SYSTEM"}},
		{name: "run_as_username", user: `a\b\c`, hostProcess: true, field: []string{"run_as_username", "more than one backslash"}},
		// Refused before.
		{name: "env without a name", extra: map[string]any{"envs": []map[string]string{{"key": "", "value": "v"}}}, field: []string{"(CRI envs)", "no name before '='"}},
	}
)

// Bad input gets one answer: each class through crictl, with the same
// error class (InvalidArgument) and field name in both sandbox modes, at
// pod level and at container level, in ordinary and HostProcess pods
// (both emulation backends); nothing is made for a refused config, and the
// pods take good containers afterwards.
func TestCRIBadInput(t *testing.T) {
	forEachSandboxer(t, criBadInput)
}

func criBadInput(t *testing.T, sandboxer string) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: sandboxer})
	importPodImages(t, n)
	importHostProcessImage(t, n)
	ctx := context.Background()

	for _, tc := range badPods {
		t.Run("pod "+tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			spec := podSpec(t, name, true)
			tc.change(spec)
			out, err := n.Crictl(ctx, "runp", "--runtime", "winproc", writeJSON(t, name+".json", spec))
			if err == nil {
				id := lastLine(out)
				n.Crictl(ctx, "stopp", id)
				n.Crictl(ctx, "rmp", id)
				t.Fatalf("runp accepted the pod")
			}
			requireRefusal(t, out, tc.field)
		})
	}
	if out := crictl(t, n, "pods", "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("refused pods are listed:\n%s", out)
	}

	pod := runPod(t, n, "bad-ctr")
	hpPod := runPodWith(t, n, "agents", hostProcessPodConfig(t))
	for _, tc := range badContainers {
		t.Run("container "+tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			extra := map[string]any{}
			maps.Copy(extra, tc.extra)
			if tc.user != "" {
				extra["windows"] = map[string]any{"security_context": map[string]any{"run_as_username": tc.user}}
			}
			requireStartRefused(t, n, pod, containerConfig(t, name, testAppImage, []string{testApp, "env"}, extra), podConfig(t, "bad-ctr"), tc.field)
			if !tc.hostProcess {
				return
			}
			extra = map[string]any{}
			maps.Copy(extra, tc.extra)
			extra["windows"] = hostProcessSecurity(cmp.Or(tc.user, `NT AUTHORITY\SYSTEM`))
			requireStartRefused(t, n, hpPod, containerConfig(t, "hp-"+name, hostProcessImage, []string{"winproc-testapp.exe", "env"}, extra), hostProcessPodConfig(t), tc.field)
		})
	}
	if out := crictl(t, n, "ps", "-a", "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("refused containers are listed:\n%s", out)
	}

	// The pods still run good containers, with the longest value Windows
	// takes intact.
	long := strings.Repeat("y", 32767)
	ctr := lastLine(crictl(t, n, "create", pod, containerConfig(t, "good", testAppImage, []string{testApp, "env"},
		map[string]any{"envs": []map[string]string{{"key": "LONGEST", "value": long}}}), podConfig(t, "bad-ctr")))
	crictl(t, n, "start", ctr)
	waitExited(t, n, ctr)
	if got := envValue(crictl(t, n, "logs", ctr), "LONGEST"); len(got) != len(long) {
		t.Errorf("the container saw LONGEST with %d characters, want %d", len(got), len(long))
	}
	crictl(t, n, "rm", ctr)
	hp := createHostProcess(t, n, hpPod, "hp-good", `NT AUTHORITY\SYSTEM`, []string{"winproc-testapp.exe", "env"})
	crictl(t, n, "start", hp)
	if code := waitExited(t, n, hp); code != 0 {
		t.Errorf("the HostProcess container exited %d", code)
	}
	crictl(t, n, "rm", hp)
}

// requireStartRefused creates the container of config cfg in pod, which
// containerd's CRI only records, and checks that its start, where the shim
// is given it, is refused naming field; the container is removed.
func requireStartRefused(t *testing.T, n *node.Node, pod, cfg, podCfg string, field []string) {
	t.Helper()
	ctx := context.Background()
	out, err := n.Crictl(ctx, "create", pod, cfg, podCfg)
	if err != nil {
		// containerd's CRI refused it first: its answer, not winproc's.
		t.Fatalf("create: %v\n%s", err, out)
	}
	id := lastLine(out)
	defer crictl(t, n, "rm", id)
	out, err = n.Crictl(ctx, "start", id)
	if err == nil {
		t.Errorf("start accepted the container")
		crictl(t, n, "stop", id)
		return
	}
	requireRefusal(t, out, field)
}

// requireRefusal checks crictl's output for an InvalidArgument refusal
// naming every part of field.
func requireRefusal(t *testing.T, out string, field []string) {
	t.Helper()
	if !strings.Contains(out, "code = InvalidArgument") {
		t.Errorf("the refusal is not InvalidArgument:\n%.2000s", out)
	}
	for _, f := range field {
		if !strings.Contains(out, f) {
			t.Errorf("the refusal does not name %q:\n%.2000s", f, out)
		}
	}
}

// A shim-mode pod, once removed, leaves nothing: no socket file in
// containerd's shim socket directory, no shim or Wine process, no mount,
// no directory of its compute systems or state; nor does one whose shim
// was killed.
func TestCRIShimPodLeavesNothing(t *testing.T) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: "shim"})
	importPodImages(t, n)
	socketDir := filepath.Join(n.Dir, "s")
	pod := runPod(t, n, "gone")
	ctr := lastLine(crictl(t, n, "create", pod, containerConfig(t, "app", testAppImage, []string{testApp, "env"}, nil), podConfig(t, "gone")))
	crictl(t, n, "start", ctr)
	waitExited(t, n, ctr)
	if entries, _ := os.ReadDir(socketDir); len(entries) == 0 {
		t.Fatalf("no shim socket in %s while the pod runs: the test looks in the wrong place", socketDir)
	}
	crictl(t, n, "rm", ctr)
	crictl(t, n, "stopp", pod)
	crictl(t, n, "rmp", pod)
	requireNoPodLeft(t, n, pod)
	requireNoLeaks(t, n, ctr)
	if entries, err := os.ReadDir(socketDir); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("left in the shim socket directory %s: %v", socketDir, names)
	}
	if ps := n.Processes(); len(ps) > 0 {
		t.Errorf("processes left: %v", ps)
	}

	// A pod whose shim was killed: containerd's delete of it removes the
	// dead shim's socket.
	dead := runPod(t, n, "dead")
	killShims(t, n)
	// containerd learns of the death on its own time: until then the
	// sandbox's status fails ("ttrpc: closed"), and the kubelet retries.
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := n.Crictl(ctx, "stopp", dead)
		if err == nil {
			out, err = n.Crictl(ctx, "rmp", dead)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod of a killed shim cannot be removed: %v\n%s", err, out)
		}
	}
	requireNoPodLeft(t, n, dead)
	if entries, err := os.ReadDir(socketDir); err == nil && len(entries) > 0 {
		t.Errorf("a killed shim's socket is left in %s: %v", socketDir, entries)
	}
}
