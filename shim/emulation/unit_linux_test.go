//go:build linux

package emulation

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// Fast tests of the pure parts; emulation_linux_test.go runs Wine.

func TestCPath(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr error
	}{
		{in: `C:\`, want: nil},
		{in: `C:`, want: nil},
		{in: `c:\Windows\System32`, want: []string{"Windows", "System32"}},
		{in: `C:/a//b/./c/../d`, want: []string{"a", "b", "d"}},
		{in: `C:\..\..\x`, want: []string{"x"}},
		{in: `\\?\C:\data`, want: []string{"data"}},
		{in: `D:\data`, wantErr: compute.ErrNotSupported},
		{in: `D:`, wantErr: compute.ErrNotSupported},
		{in: `\\server\share`, wantErr: compute.ErrNotSupported},
		{in: `relative\path`, wantErr: errdefs.ErrInvalidArgument},
		{in: `C:relative`, wantErr: errdefs.ErrInvalidArgument},
		{in: ``, wantErr: errdefs.ErrInvalidArgument},
	}
	for _, tc := range tests {
		got, err := cPath(tc.in)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("cPath(%q) error = %v, want %v", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("cPath(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		}
	}
	if !errors.Is(errNotSupported("x"), errdefs.ErrNotImplemented) {
		t.Error("errNotSupported does not wrap errdefs.ErrNotImplemented")
	}
}

func TestProcessEnv(t *testing.T) {
	env, winPath := processEnv([]string{
		"FOO=1",
		"Path=C:\\tools;C:\\bin",
		"foo=2",
		"TEMP=C:\\mytemp",
		"WINEDEBUG=+all",
		"LD_PRELOAD=/evil.so",
		"=C:=C:\\",
		"novalue",
		"EMPTY=",
	}, "/sys/prefix")
	get := func(name string) (string, bool) {
		var v string
		found := false
		for _, kv := range env {
			if n, val, _ := strings.Cut(kv, "="); n == name {
				v, found = val, true
			}
		}
		return v, found
	}
	count := func(name string) int {
		n := 0
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); strings.EqualFold(k, name) {
				n++
			}
		}
		return n
	}
	if v, _ := get("foo"); v != "2" || count("foo") != 1 {
		t.Errorf("FOO/foo: env %q, want one foo=2 (later entry wins ignoring case)", env)
	}
	if v, _ := get("WINEPATH"); v != `C:\tools;C:\bin` {
		t.Errorf("WINEPATH = %q, want the spec's PATH", v)
	}
	if v, _ := get("PATH"); strings.Contains(v, `C:\`) || v == "" {
		t.Errorf("Unix PATH = %q, want the shim's", v)
	}
	if !strings.HasPrefix(winPath, `C:\tools;C:\bin;`) || !strings.HasSuffix(winPath, defaultWinePath) {
		t.Errorf("Windows PATH = %q", winPath)
	}
	if _, ok := get("TEMP"); ok {
		t.Error("TEMP passed; Wine ignores it")
	}
	if _, ok := get("LD_PRELOAD"); ok {
		t.Error("LD_PRELOAD passed")
	}
	if v, _ := get("WINEDEBUG"); v != "-all" || count("WINEDEBUG") != 1 {
		t.Errorf("WINEDEBUG: env %q, want only -all", env)
	}
	if v, _ := get("WINEPREFIX"); v != "/sys/prefix" {
		t.Errorf("WINEPREFIX = %q", v)
	}
	if v, ok := get("EMPTY"); !ok || v != "" {
		t.Errorf("EMPTY = %q, %v, want empty and present", v, ok)
	}
	if v, _ := get("LANG"); v != "C.UTF-8" {
		t.Errorf("LANG = %q, want C.UTF-8", v)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "=") || kv == "novalue" {
			t.Errorf("passed %q", kv)
		}
	}

	env, winPath = processEnv([]string{"LANG=de_DE.UTF-8"}, "/p")
	if winPath != defaultWinePath {
		t.Errorf("Windows PATH without a spec PATH = %q", winPath)
	}
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, "LANG=") {
			n++
			if kv != "LANG=de_DE.UTF-8" {
				t.Errorf("%s, want the spec's LANG", kv)
			}
		}
		if strings.HasPrefix(kv, "WINEPATH=") {
			t.Errorf("%s without a spec PATH", kv)
		}
	}
	if n != 1 {
		t.Errorf("%d LANG entries", n)
	}
}

func TestOverlayData(t *testing.T) {
	got := overlayData([]string{"/l/a:b", "/l/c,d"}, `/u\x`, "/w")
	want := `lowerdir=/l/a\:b:/l/c\,d,upperdir=/u\\x,workdir=/w,index=off,redirect_dir=off,metacopy=off`
	if got != want {
		t.Errorf("overlayData = %s\nwant %s", got, want)
	}
}

func TestParseStat(t *testing.T) {
	line := "1234 (a b) c.exe) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 8 0 98765 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	st, err := parseStat(1234, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.comm != "a b) c.exe" || st.state != 'S' || st.ppid != 1 || st.utime != 250 || st.stime != 30 || st.start != 98765 {
		t.Errorf("parseStat = %+v", st)
	}
	if _, err := parseStat(1, []byte("garbage")); err == nil {
		t.Error("parseStat accepted garbage")
	}
	self, err := readStat(os.Getpid())
	if err != nil || self.state == 'Z' || self.ppid != os.Getppid() {
		t.Errorf("readStat(self) = %+v, %v", self, err)
	}
	hz, boot := clock()
	if hz == 0 || boot.IsZero() || time.Since(startTime(self)) < 0 || time.Since(startTime(self)) > time.Hour {
		t.Errorf("clock = %d, %v; own start %v", hz, boot, startTime(self))
	}
}

func TestResolveProgram(t *testing.T) {
	c := t.TempDir()
	for _, f := range []string{"Windows/System32/cmd.exe", "app/Tool.EXE", "app/data.bin", "probe.exe", "my dir/x.com", "tools/t.exe", "tools/cmd.exe"} {
		p := filepath.Join(c, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, cwd, path, want string
		wantErr               bool
	}{
		{name: "cmd", cwd: `C:\`, want: `C:\Windows\System32\cmd.exe`},
		{name: "CMD.exe", cwd: `C:\`, want: `C:\Windows\System32\cmd.exe`},
		{name: `c:\app\tool`, cwd: `C:\`, want: `C:\app\Tool.EXE`},
		{name: `app\tool.exe`, cwd: `C:\`, want: `C:\app\Tool.EXE`},
		{name: `tool`, cwd: `C:\app`, want: `C:\app\Tool.EXE`},
		{name: `\probe`, cwd: `C:\app`, want: `C:\probe.exe`},
		{name: `..\probe`, cwd: `C:\app`, want: `C:\probe.exe`},
		{name: `t`, cwd: `C:\`, path: `D:\x;"C:\tools"`, want: `C:\tools\t.exe`},
		{name: `C:\my dir\x.com`, cwd: `C:\`, want: `C:\my dir\x.com`},
		{name: `data`, cwd: `C:\app`, wantErr: true},
		{name: `nothere`, cwd: `C:\`, wantErr: true},
		{name: `C:\app`, cwd: `C:\`, wantErr: true},
		{name: `D:\x.exe`, cwd: `C:\`, wantErr: true},
	}
	for _, tc := range tests {
		cwd, _ := cPath(tc.cwd)
		real, err := resolve(c, cwd)
		if err != nil {
			t.Fatalf("resolve %s: %v", tc.cwd, err)
		}
		got, err := resolveProgram(c, tc.name, real, tc.path)
		if tc.wantErr {
			if err == nil {
				t.Errorf("resolveProgram(%q in %s) = %q, want an error", tc.name, tc.cwd, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolveProgram(%q in %s) = %q, %v, want %q", tc.name, tc.cwd, got, err, tc.want)
		}
	}
}

func TestMkdirFold(t *testing.T) {
	c := t.TempDir()
	if err := os.MkdirAll(filepath.Join(c, "Data"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(c, "out")); err != nil {
		t.Fatal(err)
	}
	p, err := mkdirFold(c, []string{"DATA", "sub"}, false)
	if err != nil || p != filepath.Join(c, "Data", "sub") {
		t.Errorf("mkdirFold = %q, %v", p, err)
	}
	p, err = mkdirFold(c, []string{"data", "file.txt"}, true)
	if fi, serr := os.Stat(p); err != nil || serr != nil || !fi.Mode().IsRegular() {
		t.Errorf("mkdirFold file = %q, %v", p, err)
	}
	if _, err := mkdirFold(c, []string{"out", "x"}, false); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("mkdirFold through a symlink out: %v, want invalid argument", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("mkdirFold created a directory outside C:")
	}
}

func TestReadKernelFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 10, 1023, 1024, 1025, 70000} {
		want := bytes.Repeat([]byte("x"), size)
		path := filepath.Join(dir, fmt.Sprint(size))
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := readKernelFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: read %d, %v", size, len(got), err)
		}
	}
	if _, err := readKernelFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want not exist", err)
	}
	// A /proc file, whose size stat does not tell.
	if b, err := readKernelFile("/proc/self/stat"); err != nil || !bytes.Contains(b, []byte(fmt.Sprintf("%d (", os.Getpid()))) {
		t.Errorf("/proc/self/stat: %q, %v", b, err)
	}
}

// The account rules are hostprocess.ParseAccount's; the emulation records
// Windows' spelling of a well-known account, and with inherit takes any.
func TestHostProcessUser(t *testing.T) {
	tests := []struct {
		user    string
		inherit bool
		want    string
		wantErr bool
	}{
		{user: `nt authority\LocalSystem`, want: `NT AUTHORITY\SYSTEM`},
		{user: `NT AUTHORITY\LocalService`, want: `NT AUTHORITY\LOCAL SERVICE`},
		{user: `.\builder`, want: `.\builder`},
		{user: `NT AUTHORITY\Nobody`, wantErr: true},
		{user: "", wantErr: true},
		{user: "", inherit: true, want: ""},
		{user: `NT AUTHORITY\Nobody`, inherit: true, want: `NT AUTHORITY\Nobody`},
	}
	for _, tc := range tests {
		got, err := hostProcessUser(tc.user, tc.inherit)
		if tc.wantErr {
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("hostProcessUser(%q, %v) = %q, %v, want invalid argument", tc.user, tc.inherit, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("hostProcessUser(%q, %v) = %q, %v, want %q", tc.user, tc.inherit, got, err, tc.want)
		}
	}
}

func TestHostProcessArgs(t *testing.T) {
	s := &system{id: "c1", st: &persisted{HostProcess: &hostProcessState{}}}
	tests := []struct {
		cmd, wd         string
		wantCmd, wantWD string
	}{
		{cmd: `agent.exe -v`, wd: "", wantCmd: `agent.exe -v`, wantWD: `C:\hpc\c1`},
		{cmd: `%CONTAINER_SANDBOX_MOUNT_POINT%\bin\agent.exe`, wd: `bin`, wantCmd: `C:\hpc\c1\bin\agent.exe`, wantWD: `C:\hpc\c1\bin`},
		{cmd: `powershell -c $env:container_sandbox_mount_point\x.ps1`, wd: `\logs\`, wantCmd: `powershell -c C:\hpc\c1\x.ps1`, wantWD: `C:\hpc\c1\logs`},
		{cmd: `x`, wd: `C:\var\log`, wantCmd: `x`, wantWD: `C:\var\log`},
		{cmd: `x`, wd: `%CONTAINER_SANDBOX_MOUNT_POINT%\data`, wantCmd: `x`, wantWD: `C:\hpc\c1\data`},
		{cmd: `x`, wd: `\\server\share`, wantCmd: `x`, wantWD: `\\server\share`},
	}
	for _, tc := range tests {
		cmd, wd, user, err := s.hostProcessArgs(&compute.ProcessSettings{CommandLine: tc.cmd, WorkingDirectory: tc.wd, User: "Users"})
		if err != nil || cmd != tc.wantCmd || wd != tc.wantWD || user != "Users" {
			t.Errorf("hostProcessArgs(%q, %q) = %q, %q, %q, %v, want %q, %q", tc.cmd, tc.wd, cmd, wd, user, err, tc.wantCmd, tc.wantWD)
		}
	}
	if _, _, _, err := s.hostProcessArgs(&compute.ProcessSettings{CommandLine: "x"}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("no user: %v, want invalid argument", err)
	}
}

func TestHostProcessEnv(t *testing.T) {
	got := hostProcessEnv([]string{
		`Path=C:\Windows\System32;C:\hpc\c1\;C:\tools`,
		`DATA=%CONTAINER_SANDBOX_MOUNT_POINT%\data`,
		`CONTAINER_SANDBOX_MOUNT_POINT=C:\elsewhere`,
	}, `C:\hpc\c1`)
	// PowerShell's and WMI's directories end PATH, as on Windows
	// (hostprocess.Environment).
	const extra = `;C:\windows\System32\WindowsPowerShell\v1.0;C:\windows\System32\Wbem`
	want := []string{
		`DATA=C:\hpc\c1\data`,
		`CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
		`PATH=C:\hpc\c1;C:\Windows\System32;C:\tools` + extra,
	}
	if !slices.Equal(got, want) {
		t.Errorf("hostProcessEnv = %q\nwant %q", got, want)
	}
	// The PATH with the mount point first goes to Wine as WINEPATH.
	env, winPath := processEnv(got, "/p")
	if !slices.Contains(env, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`) || slices.Contains(env, `CONTAINER_SANDBOX_MOUNT_POINT=C:\elsewhere`) ||
		!slices.Contains(env, `WINEPATH=C:\hpc\c1;C:\Windows\System32;C:\tools`+extra) || !strings.HasPrefix(winPath, `C:\hpc\c1;`) {
		t.Errorf("processEnv = %q, %q", env, winPath)
	}
	if got := hostProcessEnv(nil, `C:\hpc\c1`); !slices.Equal(got, []string{`CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`, `PATH=C:\hpc\c1` + extra}) {
		t.Errorf("hostProcessEnv(nil) = %q", got)
	}
}

// A HostProcess process's program is found by the rules of the
// HostProcess backend on Windows (hostprocess.ResolveProgram), in the host
// prefix's C: drive, in the case found on disk: a bare name gets only
// .exe, a name with a path is tried as written first, and an unquoted path
// with spaces is found and quoted.
func TestHostProcessProgram(t *testing.T) {
	c := t.TempDir()
	for _, f := range []string{"hpc/c1/agnhost", "hpc/c1/App.exe", "hpc/c1/bin/both", "hpc/c1/bin/both.exe", "Program Files/my app/agent.exe", "windows/system32/cmd.exe"} {
		p := filepath.Join(c, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &system{id: "c1", cdir: c, st: &persisted{HostProcess: &hostProcessState{}}}
	cwd := mountPointComps("c1")
	for _, tc := range []struct {
		line, want string
		args       []string
	}{
		{`app serve`, `C:\hpc\c1\App.exe`, []string{"serve"}},
		{`cmd /c exit 3`, `C:\windows\system32\cmd.exe`, []string{"/c", "exit", "3"}},
		{`%CONTAINER_SANDBOX_MOUNT_POINT%\agnhost pause`, `C:\hpc\c1\agnhost`, []string{"pause"}},
		{`bin\both`, `C:\hpc\c1\bin\both`, []string{}},
		{`C:\Program Files\my app\agent.exe -x`, `C:\Program Files\my app\agent.exe`, []string{"-x"}},
	} {
		program, args, err := s.hostProcessProgram(tc.line, cwd, defaultWinePath)
		if err != nil || program != tc.want || !slices.Equal(args, tc.args) {
			t.Errorf("hostProcessProgram(%q) = %q, %q, %v; want %q, %q", tc.line, program, args, err, tc.want, tc.args)
		}
	}
	if program, _, err := s.hostProcessProgram(`agnhost pause`, cwd, defaultWinePath); !errdefs.IsNotFound(err) {
		t.Errorf("hostProcessProgram(agnhost) = %q, %v; want not found (a bare name gets only .exe)", program, err)
	}
}

// A process past Windows' limits is refused by field before Wine is asked
// (Wine would cut a long value short, and Go refuses a NUL with a message
// of its own), whatever the system's state.
func TestCreateProcessRefusesPastWindowsLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		ps   compute.ProcessSettings
		want []string
	}{
		{"command line", compute.ProcessSettings{CommandLine: "app.exe " + strings.Repeat("x", 32760)}, []string{"CRI command and args", "32768 characters"}},
		{"env value", compute.ProcessSettings{CommandLine: "app.exe", Env: []string{"BIG=" + strings.Repeat("x", 32768)}}, []string{"(CRI envs)", `"BIG"`}},
		{"env NUL", compute.ProcessSettings{CommandLine: "app.exe", Env: []string{"A=b\x00"}}, []string{"(CRI envs)", "NUL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &system{id: "c1", st: &persisted{}}
			_, err := s.CreateProcess(t.Context(), &tc.ps)
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("CreateProcess = %v, want InvalidArgument", err)
			}
			for _, w := range append(tc.want, "c1") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not name %s", err, w)
				}
			}
		})
	}
}
