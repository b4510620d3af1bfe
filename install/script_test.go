package install

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/winproc/winproc/internal/containerdnames"
)

// The snapshotter's service restarts however it stops: `sc.exe failure`
// restarts it after a crash, and `sc.exe failureflag 1` also after it
// reported itself stopped with an error (a start that failed), which the
// service manager otherwise leaves stopped; every pull and pod on the node
// needs the service. Both are set before the first start.
func TestScriptServiceRecovery(t *testing.T) {
	b, err := os.ReadFile("install.ps1")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	start := regexp.MustCompile(`(?m)^\s*Start-Service \$ServiceName`).FindStringIndex(script)
	if start == nil {
		t.Fatal("install.ps1 does not start the snapshotter service (Start-Service $ServiceName)")
	}
	for _, tc := range []struct{ what, pattern string }{
		{"restart actions after a crash", `Invoke-Native 'sc\.exe' @\('failure', \$ServiceName, 'reset=', '\d+', 'actions=', 'restart/\d+(/restart/\d+)*'\)`},
		{"restart after a stop with an error", `Invoke-Native 'sc\.exe' @\('failureflag', \$ServiceName, '1'\)`},
	} {
		at := regexp.MustCompile(tc.pattern).FindStringIndex(script)
		switch {
		case at == nil:
			t.Errorf("install.ps1 sets no %s: want a line matching %s", tc.what, tc.pattern)
		case at[0] > start[0]:
			t.Errorf("install.ps1 sets the %s after starting the service", tc.what)
		}
	}
}

// The script serves and checks the snapshotter on winproc's own pipe,
// under the prefix where only administrators can create pipes, and makes
// winproc's state directories for Administrators and SYSTEM only, as
// containerd makes its own, owned by Administrators.
func TestScriptStateIsAdministratorsOnly(t *testing.T) {
	b, err := os.ReadFile("install.ps1")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	if want := "$SnapshotterPipe = '" + containerdnames.SnapshotterAddressWindows + "'"; !strings.Contains(script, want) {
		t.Errorf("install.ps1 does not set %s", want)
	}
	// containerd's sys.SddlAdministratorsLocalSystem, owned by Administrators.
	if !strings.Contains(script, "SetSecurityDescriptorSddlForm('O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)')") {
		t.Error("install.ps1 does not make its state directories for Administrators and SYSTEM only")
	}
	for _, dir := range []string{`New-StateDirectory (Join-Path $env:ProgramData 'winproc')`, `New-StateDirectory $SnapshotterRoot`} {
		if !strings.Contains(script, dir) {
			t.Errorf("install.ps1 lacks %s", dir)
		}
	}
	if regexp.MustCompile(`New-Item[^\n]*\$SnapshotterRoot`).MatchString(script) {
		t.Error("install.ps1 makes the snapshotter's root with New-Item, which inherits ProgramData's access for every user")
	}
}

// -DefaultHandler installs the fragment that makes winproc the default
// handler, under the usual name, and checks containerd took it.
func TestScriptDefaultHandler(t *testing.T) {
	b, err := os.ReadFile("install.ps1")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	for _, want := range []string{
		"$FragmentFile = '" + FragmentFile + "'",
		"$DefaultFragmentFile = '" + DefaultFragmentFile + "'",
		"[switch] $DefaultHandler",
		"$from = if ($DefaultHandler) { $DefaultFragmentFile } else { $FragmentFile }",
		"default_runtime_name",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("install.ps1 lacks %s", want)
		}
	}
}

// scriptFunction returns the body of the script's function name, from its
// declaration to the next function or the script's main lines.
func scriptFunction(t *testing.T, script, name string) string {
	t.Helper()
	at := regexp.MustCompile(`(?m)^function ` + regexp.QuoteMeta(name) + `\b`).FindStringIndex(script)
	if at == nil {
		t.Fatalf("install.ps1 has no function %s", name)
	}
	rest := script[at[1]:]
	if end := regexp.MustCompile(`(?m)^(function |\$node = )`).FindStringIndex(rest); end != nil {
		rest = rest[:end[0]]
	}
	return rest
}

// The services stop and shut down in order: containerd depends on
// winproc-snapshotter (not on a startup task, which is no service: it
// would not start), and a kubelet service on containerd, so the kubelet's
// graceful node shutdown places itself before them in PreshutdownOrder.
// `sc.exe config depend=` replaces the whole list: the script reads the
// dependencies (services and groups) first and keeps them.
func TestScriptServiceOrder(t *testing.T) {
	b, err := os.ReadFile("install.ps1")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)

	main := script[strings.Index(script, "\n$node = Get-Node"):]
	order := []string{"Register-Snapshotter", "Set-ServiceOrder $node", "Restart-Containerd $node"}
	last := -1
	for _, step := range order {
		at := strings.Index(main, "\n"+step)
		if at < 0 {
			t.Fatalf("install.ps1 does not run %s", step)
		}
		if at < last {
			t.Errorf("install.ps1 runs %s out of the order %v", step, order)
		}
		last = at
	}

	get := scriptFunction(t, script, "Get-ServiceDependency")
	for _, want := range []string{`HKLM:\SYSTEM\CurrentControlSet\Services\$Name`, "DependOnService", "DependOnGroup", `"+$_"`} {
		if !strings.Contains(get, want) {
			t.Errorf("Get-ServiceDependency lacks %s", want)
		}
	}
	set := scriptFunction(t, script, "Set-ServiceDependency")
	read, write := strings.Index(set, "Get-ServiceDependency $Name"), strings.Index(set, "Invoke-Native 'sc.exe' @('config', $Name, 'depend=', $list)")
	switch {
	case read < 0 || write < 0:
		t.Errorf("Set-ServiceDependency does not read the dependencies and set them with sc.exe config depend=:\n%s", set)
	case read > write:
		t.Error("Set-ServiceDependency sets the dependencies before reading them")
	}
	for _, want := range []string{"@($deps) + $On", "$deps | Where-Object { $_ -ne $On }", "$new -join '/'"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-ServiceDependency does not keep the other dependencies: lacks %s", want)
		}
	}

	ordering := scriptFunction(t, script, "Set-ServiceOrder")
	for _, want := range []string{
		"Set-ServiceDependency 'containerd' $ServiceName (-not $SnapshotterAsTask)",
		"Set-ServiceDependency $KubeletService 'containerd' $true",
	} {
		if !strings.Contains(ordering, want) {
			t.Errorf("Set-ServiceOrder lacks %s", want)
		}
	}
	if !strings.Contains(script, "$KubeletService = 'kubelet'") {
		t.Error("install.ps1 does not name the kubelet's service kubelet")
	}
	// Stopping the snapshotter stops its dependents: the kubelet starts
	// again after containerd.
	if restart := scriptFunction(t, script, "Restart-Containerd"); !regexp.MustCompile(`if \(\$Node\.KubeletRan\) \{\s*Start-Service \$KubeletService`).MatchString(restart) {
		t.Error("Restart-Containerd does not start the kubelet again when it ran")
	}
}
