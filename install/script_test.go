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
