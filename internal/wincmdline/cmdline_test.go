package wincmdline

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// escapeTests are Go's syscall.EscapeArg cases and more.
var escapeTests = []struct{ in, out string }{
	// Go's syscall TestEscapeArg.
	{``, `""`},
	{`a`, `a`},
	{` `, `" "`},
	{`\`, `\`},
	{`"`, `\"`},
	{`\"`, `\\\"`},
	{`\\"`, `\\\\\"`},
	{`\\ `, `"\\ "`},
	{` \\`, `" \\\\"`},
	{`a `, `"a "`},
	{`C:\`, `C:\`},
	{`C:\Program Files (x32)\Common\`, `"C:\Program Files (x32)\Common\\"`},
	{`C:\Users\Игорь\`, `C:\Users\Игорь\`},
	{`Андрей\file`, `Андрей\file`},
	{`C:\Windows\temp`, `C:\Windows\temp`},
	{`c:\temp\newfile`, `c:\temp\newfile`},
	{`\\?\C:\Windows`, `\\?\C:\Windows`},
	{`\\?\`, `\\?\`},
	{`\\.\C:\Windows\`, `\\.\C:\Windows\`},
	{`\\server\share\file`, `\\server\share\file`},
	{`\\newserver\tempshare\really.txt`, `\\newserver\tempshare\really.txt`},
	// Tabs, quotes in the middle, mixed runs.
	{"a\tb", "\"a\tb\""},
	{`say "hi"`, `"say \"hi\""`},
	{`a"b`, `a\"b`},
	{`a\\b`, `a\\b`},
	{`a\\"b`, `a\\\\\"b`},
	{`trailing\ `, `"trailing\ "`},
	{`end\\`, `end\\`},
	{`two words\\`, `"two words\\\\"`},
	{`"quoted"`, `\"quoted\"`},
	{`""`, `\"\"`},
	{`--name=a b`, `"--name=a b"`},
	{"line\nbreak", "line\nbreak"},
}

func TestEscapeArg(t *testing.T) {
	for _, tc := range escapeTests {
		if got := EscapeArg(tc.in); got != tc.out {
			t.Errorf("EscapeArg(%#q) = %#q, want %#q", tc.in, got, tc.out)
		}
	}
}

func TestJoinArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"cmd"}, "cmd"},
		{[]string{"cmd", "/c", "echo hi"}, `cmd /c "echo hi"`},
		{[]string{`C:\Program Files\x.exe`, "", `a\`, `b c\`}, `"C:\Program Files\x.exe" "" a\ "b c\\"`},
		{[]string{"powershell", "-Command", `Write-Host "x y"`}, `powershell -Command "Write-Host \"x y\""`},
	} {
		if got := JoinArgs(tc.args); got != tc.want {
			t.Errorf("JoinArgs(%q) = %#q, want %#q", tc.args, got, tc.want)
		}
	}
}

// TestSplitCommandLine uses the examples of
// daviddeley.com/autohotkey/parameters/parameters.htm (the 2008 and later
// rules), with a program name in front.
func TestSplitCommandLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{``, nil},
		{`   `, nil},
		{`prog`, []string{"prog"}},
		{`  prog  `, []string{"prog"}},
		{`"C:\Program Files\x.exe" a`, []string{`C:\Program Files\x.exe`, "a"}},
		{`C:\dir\"quoted part"\x.exe`, []string{`C:\dir\quoted part\x.exe`}},
		{`prog \"a`, []string{"prog", `"a`}},
		{`prog "Call Me Ishmael"`, []string{"prog", "Call Me Ishmael"}},
		{`prog Cal"l Me I"shmael`, []string{"prog", "Call Me Ishmael"}},
		{`prog CallMe\"Ishmael`, []string{"prog", `CallMe"Ishmael`}},
		{`prog "CallMe\"Ishmael"`, []string{"prog", `CallMe"Ishmael`}},
		{`prog "Call Me Ishmael\\"`, []string{"prog", `Call Me Ishmael\`}},
		{`prog "CallMe\\\"Ishmael"`, []string{"prog", `CallMe\"Ishmael`}},
		{`prog a\\\b`, []string{"prog", `a\\\b`}},
		{`prog "a\\\b"`, []string{"prog", `a\\\b`}},
		{`prog "\"Call Me Ishmael\""`, []string{"prog", `"Call Me Ishmael"`}},
		{`prog "C:\TEST A\\"`, []string{"prog", `C:\TEST A\`}},
		{`prog "\"C:\TEST A\\\""`, []string{"prog", `"C:\TEST A\"`}},
		{`prog "a b c"  d  e`, []string{"prog", "a b c", "d", "e"}},
		{`prog "ab\"c"  "\\"  d`, []string{"prog", `ab"c`, `\`, "d"}},
		{`prog a\\\b d"e f"g h`, []string{"prog", `a\\\b`, "de fg", "h"}},
		{`prog a\\\"b c d`, []string{"prog", `a\"b`, "c", "d"}},
		{`prog a\\\\"b c" d e`, []string{"prog", `a\\b c`, "d", "e"}},
		// "" inside quotes: a literal quote, still quoted (2008 and later).
		{`prog "a b c""`, []string{"prog", `a b c"`}},
		{`prog """CallMeIshmael"""  b  c`, []string{"prog", `"CallMeIshmael"`, "b", "c"}},
		{`prog """Call Me Ishmael"""`, []string{"prog", `"Call Me Ishmael"`}},
		{`prog """"Call Me Ishmael"" b c`, []string{"prog", `"Call`, "Me", "Ishmael", "b", "c"}},
		{"prog\ta\t\"b\tc\"", []string{"prog", "a", "b\tc"}},
		{`prog "" x`, []string{"prog", "", "x"}},
		{`prog trailing\`, []string{"prog", `trailing\`}},
		{`prog "unterminated arg`, []string{"prog", "unterminated arg"}},
	} {
		if got := SplitCommandLine(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitCommandLine(%#q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestJoinSplitRoundTrip checks that the arguments JoinArgs writes are the
// arguments the C runtime reads back.
func TestJoinSplitRoundTrip(t *testing.T) {
	check := func(args []string) {
		t.Helper()
		line := JoinArgs(args)
		if got := SplitCommandLine(line); !reflect.DeepEqual(got, args) {
			t.Errorf("args %q\njoined %#q\nsplit  %q", args, line, got)
		}
	}
	for _, tc := range escapeTests {
		check([]string{`C:\Program Files\prog.exe`, tc.in})
		check([]string{"prog", tc.in, tc.in})
	}
	r := rand.New(rand.NewSource(1))
	const alphabet = "ab \t\"\\\\\\"
	for range 5000 {
		args := []string{"prog"}
		for range r.Intn(4) + 1 {
			var b strings.Builder
			for range r.Intn(8) {
				b.WriteByte(alphabet[r.Intn(len(alphabet))])
			}
			args = append(args, b.String())
		}
		check(args)
	}
}

func FuzzJoinSplit(f *testing.F) {
	for _, tc := range escapeTests {
		f.Add(tc.in, "x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		args := []string{"prog", a, b}
		if got := SplitCommandLine(JoinArgs(args)); !reflect.DeepEqual(got, args) {
			t.Errorf("args %q: split %q", args, got)
		}
	})
}

func TestProgram(t *testing.T) {
	for in, want := range map[string]string{
		`C:\pause.exe`:                    `C:\pause.exe`,
		`C:\pause.exe -v`:                 `C:\pause.exe`,
		`  cmd /S /C C:\pause.exe`:        `cmd`,
		`"C:\Program Files\pause.exe" -v`: `C:\Program Files\pause.exe`,
		`"C:\Program Files\pause.exe`:     `C:\Program Files\pause.exe`,
		"C:\\pause.exe\t-v":               `C:\pause.exe`,
		`"C:\Program Files\p.exe"`:        `C:\Program Files\p.exe`,
		// Quotes only group; Windows never keeps them in a program name.
		`C:\"odd"\p.exe arg`:                   `C:\odd\p.exe`,
		``:                                     ``,
		`"C:\Program Files\x\pause.exe" "a b"`: `C:\Program Files\x\pause.exe`,
	} {
		if got := Program(in); got != want {
			t.Errorf("Program(%q) = %q, want %q", in, got, want)
		}
	}
}
