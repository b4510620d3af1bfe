package demo

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// transcript prints the demo the way a user would see it in a terminal:
// shell commands after "$ ", containerd Go client calls after "go> ", and
// what they print indented below them.
type transcript struct {
	w    io.Writer
	dir  string // the demo directory, the working directory of the shown shell
	step int
}

// section starts a numbered part of the demo.
func (t *transcript) section(title string) {
	t.step++
	fmt.Fprintf(t.w, "\n== %d. %s ==\n\n", t.step, title)
}

// note prints an explanation as shell comments.
func (t *transcript) note(lines ...string) {
	for _, l := range lines {
		fmt.Fprintf(t.w, "# %s\n", l)
	}
}

// command shows a shell command line.
func (t *transcript) command(line string) { fmt.Fprintf(t.w, "$ %s\n", line) }

// call shows a containerd Go client (or ttrpc) call.
func (t *transcript) call(line string) { fmt.Fprintf(t.w, "go> %s\n", line) }

// output shows what a command printed, indented; trailing blank lines are
// dropped.
func (t *transcript) output(s string) {
	s = strings.TrimRight(s, "\n \t")
	if s == "" {
		return
	}
	for _, l := range strings.Split(s, "\n") {
		fmt.Fprintf(t.w, "    %s\n", strings.TrimRight(l, "\r"))
	}
}

// shellLine renders argv as a shell command line: the program by its name
// (it is on the shown PATH), paths inside the demo directory relative to it
// (the shown working directory), and arguments quoted where a shell needs it.
func (t *transcript) shellLine(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if i == 0 {
			a = a[strings.LastIndexByte(a, '/')+1:]
		}
		parts[i] = shellQuote(t.rel(a))
	}
	return strings.Join(parts, " ")
}

// rel shows a path inside the demo directory relative to it.
func (t *transcript) rel(s string) string {
	if t.dir == "" {
		return s
	}
	if s == t.dir {
		return "."
	}
	return strings.TrimPrefix(s, t.dir+"/")
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9_./:=@,+%-]+$`)

// shellQuote quotes s for a POSIX shell unless it needs no quoting.
func shellQuote(s string) string {
	if plainArg.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
