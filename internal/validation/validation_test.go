package validation

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestValidation(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	// U+1F600 is two UTF-16 code units: Windows counts it twice.
	wide := func(n int) string { return strings.Repeat("\U0001F600", n) }
	tests := []struct {
		name  string
		check func() error
		want  []string // substrings of the error; nil for none
	}{
		{"command line at the limit", func() error { return CommandLine(long(MaxCommandLine), "spec.process.args") }, nil},
		{"command line past the limit", func() error { return CommandLine(long(MaxCommandLine+1), "spec.process.args") },
			[]string{"spec.process.args (CRI command and args)", "32767 characters", "at most 32766"}},
		{"command line past the limit in UTF-16", func() error { return CommandLine(wide(MaxCommandLine/2+1), "spec.process.commandLine") },
			[]string{"spec.process.commandLine", "32768 characters"}},
		{"command line with a NUL", func() error { return CommandLine("a.exe \x00b", "process.args") },
			[]string{"process.args (CRI command and args)", "NUL"}},
		{"env at the limit", func() error { return Env([]string{"A=b", "BIG=" + long(MaxEnvValue)}, "spec.process.env") }, nil},
		{"env value past the limit", func() error { return Env([]string{"A=b", "BIG=" + long(MaxEnvValue+1)}, "spec.process.env") },
			[]string{`spec.process.env[1] (CRI envs), variable "BIG"`, "32768 characters", "at most 32767"}},
		{"env value past the limit in UTF-16", func() error { return Env([]string{"W=" + wide(MaxEnvValue/2+1)}, "process.env") },
			[]string{`process.env[0] (CRI envs), variable "W"`, "32768 characters"}},
		{"env value with a NUL", func() error { return Env([]string{"A=b", "C=d\x00e"}, "spec.process.env") },
			[]string{`spec.process.env[1] (CRI envs), variable "C"`, "NUL"}},
		{"env name with a NUL", func() error { return Env([]string{"C\x00D=e"}, "spec.process.env") },
			[]string{`spec.process.env[0] (CRI envs), variable "C\\x00D"`, "NUL"}},
		{"env without '='", func() error { return Env([]string{"A"}, "spec.process.env") }, []string{"spec.process.env[0] (CRI envs)", "no '='"}},
		{"env without a name", func() error { return Env([]string{"=C:=C:\\"}, "spec.process.env") }, []string{"spec.process.env[0] (CRI envs)", "no name"}},
		{"empty value", func() error { return Env([]string{"A="}, "spec.process.env") }, nil},
		{"no user", func() error { return User("", "spec.process.user.username") }, nil},
		{"local user", func() error { return User("ContainerUser", "spec.process.user.username") }, nil},
		{"NT AUTHORITY account", func() error { return User(`NT AUTHORITY\SYSTEM`, "spec.process.user.username") }, nil},
		{"forward slash", func() error { return User("NT AUTHORITY/SYSTEM", "spec.process.user.username") },
			[]string{`spec.process.user.username "NT AUTHORITY/SYSTEM" (CRI run_as_username`, "cannot contain"}},
		{"two backslashes", func() error { return User(`a\b\c`, "f") }, []string{"run_as_username", "more than one backslash"}},
		{"empty domain", func() error { return User(`\u`, "f") }, []string{"run_as_username", "empty domain"}},
		{"bad domain", func() error { return User(`a:b\u`, "f") }, []string{"run_as_username", "domain"}},
		{"control character", func() error { return User("u\tv", "f") }, []string{"run_as_username", "control"}},
		{"too long", func() error { return User(long(257), "f") }, []string{"run_as_username", "more than 256"}},
		{"user too long", func() error { return User(long(105), "f") }, []string{"run_as_username", "longer than 104"}},
		{"only dots", func() error { return User("..", "f") }, []string{"run_as_username", "only dots"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("err = %v, want an InvalidArgument error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
