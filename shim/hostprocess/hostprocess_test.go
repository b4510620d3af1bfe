package hostprocess

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// The rules' tables: each case is what Windows (CreateProcess, the
// environment block) or runhcs (hcsshim v0.15.0 internal/jobcontainers)
// does with the input, for both backends that use them.

func TestResolveProgram(t *testing.T) {
	files := map[string]bool{
		`c:\hpc\c1\app.exe`:                     true,
		`c:\hpc\c1\cmd.exe`:                     true, // the image's own cmd.exe wins over System32's
		`c:\hpc\c1\bin\tool.exe`:                true,
		`c:\hpc\c1\run.bat`:                     true,
		`c:\hpc\c1\noext`:                       true,
		`c:\hpc\c1\agnhost`:                     true, // Kubernetes' test image's program has no extension
		`c:\hpc\c1\bin\both`:                    true,
		`c:\hpc\c1\bin\both.exe`:                true,
		`c:\windows\system32\cmd.exe`:           true,
		`c:\windows\system32\ping.exe`:          true,
		`c:\program files\my app\agent.exe`:     true,
		`c:\work\local.exe`:                     true,
		`c:\tools\frompath.exe`:                 true,
		`c:\windows\system32\dirlike.exe\x.txt`: true,
	}
	isFile := func(p string) bool { return files[strings.ToLower(p)] }
	search := SearchPath(`C:\hpc\c1`, `C:\work`, `C:\Windows`, `C:\Windows\system32;"C:\tools";;`)
	for _, tc := range []struct {
		name, line, path, want string
	}{
		{"bare name, in the mount point", `app.exe serve`, `C:\hpc\c1\app.exe`, `app.exe serve`},
		{".exe appended", `app serve`, `C:\hpc\c1\app.exe`, `app serve`},
		{"the mount point before System32", `cmd /c dir`, `C:\hpc\c1\cmd.exe`, `cmd /c dir`},
		{"System32", `ping -n 1 localhost`, `C:\Windows\System32\ping.exe`, `ping -n 1 localhost`},
		{"the working directory", `local`, `C:\work\local.exe`, `local`},
		{"PATH, quoted entry", `fromPATH x`, `C:\tools\fromPATH.exe`, `fromPATH x`},
		{"relative with a directory", `bin\tool.exe -v`, `C:\hpc\c1\bin\tool.exe`, `bin\tool.exe -v`},
		{"rooted without a drive", `\bin\tool`, `C:\hpc\c1\bin\tool.exe`, `\bin\tool`},
		{"full path", `C:\Windows\system32\cmd.exe /c exit 3`, `C:\Windows\system32\cmd.exe`, `C:\Windows\system32\cmd.exe /c exit 3`},
		{"the mount point variable", `%CONTAINER_SANDBOX_MOUNT_POINT%\bin\tool.exe a`, `C:\hpc\c1\bin\tool.exe`, `C:\hpc\c1\bin\tool.exe a`},
		{"the variable in any case, and PowerShell's", `$ENV:container_sandbox_mount_point\app.exe`, `C:\hpc\c1\app.exe`, `C:\hpc\c1\app.exe`},
		{"quoted", `"C:\Program Files\my app\agent.exe" -x "y z"`, `C:\Program Files\my app\agent.exe`, `"C:\Program Files\my app\agent.exe" -x "y z"`},
		{"unquoted with spaces: quoted for the program", `C:\Program Files\my app\agent.exe -x`, `C:\Program Files\my app\agent.exe`, `"C:\Program Files\my app\agent.exe" -x`},
		{"unquoted with spaces, no extension", `C:\Program Files\my app\agent -x`, `C:\Program Files\my app\agent.exe`, `"C:\Program Files\my app\agent" -x`},
		{"an extension is kept", `run.bat x`, `C:\hpc\c1\run.bat`, `run.bat x`},
		{"a trailing dot means no extension", `noext. a`, `C:\hpc\c1\noext`, `noext. a`},
		{"tabs separate", "app.exe\tserve", `C:\hpc\c1\app.exe`, "app.exe\tserve"},
		// CreateProcess's rules for the extension (lpCommandLine): a name
		// with a path is the file as written, else with .exe.
		{"full path without an extension", `C:\hpc\c1\agnhost netexec`, `C:\hpc\c1\agnhost`, `C:\hpc\c1\agnhost netexec`},
		{"the mount point variable, no extension", `%CONTAINER_SANDBOX_MOUNT_POINT%\agnhost pause`, `C:\hpc\c1\agnhost`, `C:\hpc\c1\agnhost pause`},
		{"rooted without a drive, no extension (an image's entrypoint)", `/agnhost pause`, `C:\hpc\c1\agnhost`, `/agnhost pause`},
		{"with a path, the name as written before .exe", `bin\both`, `C:\hpc\c1\bin\both`, `bin\both`},
		{"full path: .exe when the name as written is not there", `C:\Windows\System32\ping -n 1`, `C:\Windows\System32\ping.exe`, `C:\Windows\System32\ping -n 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ResolveProgram(tc.line, `C:\hpc\c1`, `C:\work`, search, isFile)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.EqualFold(p.Path, tc.path) || p.CommandLine != tc.want {
				t.Errorf("ResolveProgram(%q) = %q, %q; want %q, %q", tc.line, p.Path, p.CommandLine, tc.path, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, line string
		check      func(error) bool
		names      []string
	}{
		{"missing", `agent.exe --run`, errdefs.IsNotFound, []string{`"agent.exe"`, `C:\hpc\c1`, `C:\tools`, "--run"}},
		{"missing with a directory", `bin\nope.exe`, errdefs.IsNotFound, []string{`"bin\\nope.exe"`, `C:\hpc\c1 and C:\work`}},
		{"missing full path", `C:\nope\x.exe`, errdefs.IsNotFound, []string{`"C:\\nope\\x.exe"`, "its path"}},
		{"a directory is no program", `dirlike.exe`, errdefs.IsNotFound, []string{"dirlike.exe"}},
		{"a bare name gets only .exe", `agnhost pause`, errdefs.IsNotFound, []string{`"agnhost"`}},
		{"no closing quote", `"C:\Program Files\x`, errdefs.IsInvalidArgument, []string{"closing quote"}},
		{"empty", `  `, errdefs.IsInvalidArgument, []string{"empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ResolveProgram(tc.line, `C:\hpc\c1`, `C:\work`, search, isFile)
			if !tc.check(err) {
				t.Fatalf("ResolveProgram(%q) = %v", tc.line, err)
			}
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("%v does not name %s", err, n)
				}
			}
		})
	}
}

func TestSearchPath(t *testing.T) {
	got := SearchPath(`C:\hpc\c1`, `C:\hpc\c1\work`, `C:\Windows`, `C:\a; "C:\b c" ;;C:\d`)
	want := []string{`C:\hpc\c1`, `C:\hpc\c1\work`, `C:\Windows\System32`, `C:\Windows\System`, `C:\Windows`, `C:\a`, `C:\b c`, `C:\d`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("searchPath = %q", got)
	}
}

func TestWorkingDirectory(t *testing.T) {
	for _, tc := range []struct{ wd, want string }{
		{"", `C:\hpc\c1`},
		{`work`, `C:\hpc\c1\work`},
		{`.\work\`, `C:\hpc\c1\.\work`},
		{`\work`, `C:\hpc\c1\work`},
		{`C:\host\dir`, `C:\host\dir`},
		{`%CONTAINER_SANDBOX_MOUNT_POINT%\app`, `C:\hpc\c1\app`},
		{`\\server\share\x`, `\\server\share\x`},
		{`\logs\`, `C:\hpc\c1\logs`},
		{`bin`, `C:\hpc\c1\bin`},
		{`C:work`, `C:\hpc\c1\C:work`}, // drive-relative: not a full path
	} {
		if got := WorkingDirectory(tc.wd, `C:\hpc\c1`); got != tc.want {
			t.Errorf("WorkingDirectory(%q) = %q, want %q", tc.wd, got, tc.want)
		}
	}
}

func TestExpandMountPoint(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`%CONTAINER_SANDBOX_MOUNT_POINT%\x %container_sandbox_mount_point%\y`, `C:\m\x C:\m\y`},
		{`$env:CONTAINER_SANDBOX_MOUNT_POINT\x`, `C:\m\x`},
		{`%CONTAINER_SANDBOX_MOUNT_POINT`, `%CONTAINER_SANDBOX_MOUNT_POINT`},
		{`%OTHER%`, `%OTHER%`},
	} {
		if got := ExpandMountPoint(tc.in, `C:\m`); got != tc.want {
			t.Errorf("ExpandMountPoint(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEnvironment(t *testing.T) {
	const ps, wbem = `C:\Windows\System32\WindowsPowerShell\v1.0`, `C:\Windows\System32\Wbem`
	profile := []string{`Path=C:\Windows\system32;C:\Windows`, `TEMP=C:\Users\u\Temp`, `=C:=C:\x`, `USERNAME=u`}
	for _, tc := range []struct {
		name string
		spec []string
		want []string
	}{
		{"profile, then the container's additions", nil, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\Windows\system32;C:\Windows;` + ps + `;` + wbem,
		}},
		// NAME= is a variable with an empty value, as runhcs passes it
		// (hcsshim internal/exec, dedupEnvCase and createEnvBlock).
		{"the spec over the profile, names without case; NAME= empties", []string{`temp=D:\t`, `USERNAME=`, `A=1`, `a=2`}, []string{
			`temp=D:\t`, `USERNAME=`, `a=2`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\Windows\system32;C:\Windows;` + ps + `;` + wbem,
		}},
		{"a spec PATH keeps the mount point in front, PowerShell once", []string{`PATH=C:\app;` + ps + `\`}, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\app;` + ps + `\;` + wbem,
		}},
		{"the spec cannot move the mount point", []string{`CONTAINER_SANDBOX_MOUNT_POINT=C:\elsewhere`, `PATH=C:\hpc\c1\;C:\x`}, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\x;` + ps + `;` + wbem,
		}},
		{"values expand the mount point", []string{`CONF=%CONTAINER_SANDBOX_MOUNT_POINT%\conf`, `broken`}, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONF=C:\hpc\c1\conf`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\Windows\system32;C:\Windows;` + ps + `;` + wbem,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []string(Environment(profile, tc.spec, `C:\hpc\c1`, `C:\Windows`))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Environment =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestParseAccount(t *testing.T) {
	for _, tc := range []struct {
		user string
		want Account
		// spelling is the account's String: Windows' name of a well-known
		// account, any other as written.
		spelling string
	}{
		{`NT AUTHORITY\SYSTEM`, Account{AccountSystem, "SYSTEM", "NT AUTHORITY"}, `NT AUTHORITY\SYSTEM`},
		{`nt authority\system`, Account{AccountSystem, "system", "nt authority"}, `NT AUTHORITY\SYSTEM`},
		{`nt authority\LocalSystem`, Account{AccountSystem, "LocalSystem", "nt authority"}, `NT AUTHORITY\SYSTEM`},
		{`NT AUTHORITY\Local Service`, Account{AccountService, "Local Service", "NT AUTHORITY"}, `NT AUTHORITY\LOCAL SERVICE`},
		{`NT AUTHORITY\LocalService`, Account{AccountService, "LocalService", "NT AUTHORITY"}, `NT AUTHORITY\LOCAL SERVICE`},
		{` NT AUTHORITY\NETWORK SERVICE `, Account{AccountService, "NETWORK SERVICE", "NT AUTHORITY"}, `NT AUTHORITY\NETWORK SERVICE`},
		{`NT AUTHORITY\NetworkService`, Account{AccountService, "NetworkService", "NT AUTHORITY"}, `NT AUTHORITY\NETWORK SERVICE`},
		{`Administrators`, Account{AccountLocal, "Administrators", ""}, `Administrators`},
		{`BUILTIN\Users`, Account{AccountLocal, "Users", "BUILTIN"}, `BUILTIN\Users`},
		{`.\agent`, Account{AccountLocal, "agent", "."}, `.\agent`},
		{`CORP\svc-agent`, Account{AccountDomain, "svc-agent", "CORP"}, `CORP\svc-agent`},
	} {
		got, err := ParseAccount(tc.user)
		if err != nil || got != tc.want || got.String() != tc.spelling {
			t.Errorf("ParseAccount(%q) = %+v (%s), %v; want %+v (%s)", tc.user, got, got, err, tc.want, tc.spelling)
		}
	}
	for _, user := range []string{"", "  ", `NT AUTHORITY\IUSR`, `NT AUTHORITY\Nobody`, `CORP\`} {
		if _, err := ParseAccount(user); !errdefs.IsInvalidArgument(err) {
			t.Errorf("ParseAccount(%q) = %v", user, err)
		}
	}
}
