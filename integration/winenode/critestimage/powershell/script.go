// Command powershell is the conformance image's powershell.exe (see
// package critestimage): it runs the scripts critest sends to a Windows
// container, `powershell -c SCRIPT` or `powershell /c SCRIPT`, and refuses
// every other script with exit status 1.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// statusControlC is the exit status of a Windows process ended by a
// console control event it does not handle (STATUS_CONTROL_C_EXIT).
const statusControlC = 0xC000013A

// errStopped ends a script at a console control event.
var errStopped = errors.New("stopped by a console control event")

// process is one line of get-process.
type process struct {
	ID   uint32
	Name string
}

// shell runs a script; its seams are the system's: the environment, the
// process list, external programs and console events.
type shell struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	processes      func() ([]process, error)
	// external runs a program with the shell's standard streams and
	// returns its exit status.
	external func(args []string) (int, error)
	events   <-chan os.Signal
}

// exitStatus carries `exit N` out of the script.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// nativeStatus is a program's non-zero exit status: the script goes on,
// and ends with status 1 if the program was its last statement, as
// `powershell -c` does.
type nativeStatus int

func (e nativeStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// run runs the script and returns the process's exit status.
func (sh *shell) run(script string) int {
	err := sh.statements(script)
	var code exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, errStopped):
		return statusControlC
	}
	fmt.Fprintf(sh.stderr, "powershell: %v\r\n", err)
	return 1
}

// statements runs the script's statements, split at top-level `;`.
func (sh *shell) statements(script string) error {
	var last error
	for _, st := range split(script, ';') {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		last = sh.statement(st)
		var native nativeStatus
		if last != nil && !errors.As(last, &native) {
			return last
		}
	}
	if last != nil {
		return exitStatus(1)
	}
	return nil
}

func (sh *shell) statement(st string) error {
	if body, ok := whileTrue(st); ok {
		for {
			if err := sh.statements(body); err != nil {
				return err
			}
		}
	}
	stages := split(st, '|')
	if len(stages) == 1 {
		return sh.command(strings.TrimSpace(st), sh.stdin, sh.stdout)
	}
	var in io.Reader = sh.stdin
	for i, stage := range stages {
		var out bytes.Buffer
		w := io.Writer(&out)
		if i == len(stages)-1 {
			w = sh.stdout
		}
		if err := sh.command(strings.TrimSpace(stage), in, w); err != nil {
			return err
		}
		in = &out
	}
	return nil
}

// whileTrue reads `while($true) { BODY }`, the only loop critest sends.
func whileTrue(st string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.ToLower(st), "while")
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "($true)") {
		return "", false
	}
	open, end := strings.IndexByte(st, '{'), strings.LastIndexByte(st, '}')
	if open < 0 || end < open {
		return "", false
	}
	return st[open+1 : end], true
}

// command runs one command of a pipeline.
func (sh *shell) command(line string, in io.Reader, out io.Writer) error {
	args := sh.words(line)
	if len(args) == 0 {
		return nil
	}
	name := strings.ToLower(args[0])
	switch {
	case strings.HasPrefix(line, "$env:") && len(args) == 1:
		fmt.Fprintf(out, "%s\r\n", args[0])
		return nil
	case name == "echo" || name == "write-output":
		for _, a := range args[1:] {
			fmt.Fprintf(out, "%s\r\n", a)
		}
		return nil
	case name == "start-sleep" || name == "sleep":
		return sh.sleep(args[1:])
	case name == "exit":
		return exitCommand(args[1:])
	case name == "get-process" || name == "ps":
		return sh.getProcess(args[1:], out)
	case name == "findstr":
		return findstr(args[1:], in, out)
	case name == "ls" || name == "dir" || name == "get-childitem":
		return getChildItem(args[1:], out)
	case strings.ContainsAny(name, "$({"):
		return fmt.Errorf("%q: this image's powershell runs only the scripts critest sends", line)
	}
	code, err := sh.runExternal(args)
	if err != nil {
		return err
	}
	if code != 0 {
		return nativeStatus(code)
	}
	return nil
}

// runExternal runs a program and returns its exit status; a console
// control event ends the script meanwhile, as it ends powershell.exe (the
// system ends a console process after its handler for a close, logoff or
// shutdown event; the program gets the event on its own).
func (sh *shell) runExternal(args []string) (int, error) {
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := sh.external(args)
		done <- result{code, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return 0, fmt.Errorf("%s: %w", args[0], r.err)
		}
		return r.code, nil
	case <-sh.events:
		return 0, errStopped
	}
}

func (sh *shell) sleep(args []string) error {
	if len(args) > 0 && (strings.EqualFold(args[0], "-s") || strings.EqualFold(args[0], "-seconds")) {
		args = args[1:]
	}
	if len(args) != 1 {
		return fmt.Errorf("start-sleep: want a number of seconds, got %q", args)
	}
	s, err := strconv.ParseFloat(args[0], 64)
	if err != nil || s < 0 {
		return fmt.Errorf("start-sleep: %q is not a number of seconds", args[0])
	}
	t := time.NewTimer(time.Duration(s * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-sh.events:
		return errStopped
	}
}

func exitCommand(args []string) error {
	if len(args) == 0 {
		return exitStatus(0)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("exit: %q is not a number", args[0])
	}
	return exitStatus(n)
}

// getProcess writes the process table as Get-Process's default view
// shows its last two columns.
func (sh *shell) getProcess(args []string, out io.Writer) error {
	if len(args) != 0 {
		return fmt.Errorf("get-process: no arguments supported, got %q", args)
	}
	ps, err := sh.processes()
	if err != nil {
		return fmt.Errorf("get-process: %w", err)
	}
	fmt.Fprintf(out, "\r\n     Id ProcessName\r\n     -- -----------\r\n")
	for _, p := range ps {
		fmt.Fprintf(out, "%7d %s\r\n", p.ID, strings.TrimSuffix(p.Name, filepath.Ext(p.Name)))
	}
	return nil
}

// findstr writes the lines of in that hold the string (case-sensitive,
// as findstr is without /I); none found is exit status 1.
func findstr(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("findstr: want one string, got %q", args)
	}
	found := false
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), "\r"); strings.Contains(line, args[0]) {
			fmt.Fprintf(out, "%s\r\n", line)
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("findstr: %w", err)
	}
	if !found {
		return nativeStatus(1)
	}
	return nil
}

// getChildItem lists a directory as Get-ChildItem does: a header naming
// it, then mode, time, length and name of each entry; nothing for an
// empty directory.
func getChildItem(args []string, out io.Writer) error {
	dir := "."
	if len(args) > 1 {
		return fmt.Errorf("ls: one path at most, got %q", args)
	}
	if len(args) == 1 {
		dir = args[0]
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("ls: cannot find path %q: %w", dir, err)
	}
	if len(entries) == 0 {
		return nil // PowerShell writes nothing for an empty directory
	}
	fmt.Fprintf(out, "\r\n    Directory: %s\r\n\r\nMode                 LastWriteTime         Length Name\r\n", dir)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("ls: %w", err)
		}
		mode, size := "-a----", strconv.FormatInt(info.Size(), 10)
		if e.IsDir() {
			mode, size = "d-----", ""
		}
		fmt.Fprintf(out, "%s %21s %14s %s\r\n", mode, info.ModTime().Format("1/2/2006 3:04 PM"), size, e.Name())
	}
	return nil
}
