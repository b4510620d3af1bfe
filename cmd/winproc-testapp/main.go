// Command winproc-testapp is the Windows test program of the winproc
// integration tests and demo: one small executable that serves HTTP, echoes
// stdin, exits with a chosen status, prints its environment, burns CPU,
// holds memory and reports console control events, so tests can watch a
// container's stdio, exit status, resource limits and stop path.
//
// Commands that wait print "ready" (serve: "listening on <addr>") on stdout
// once they would notice a console control event, so a test can wait for
// that line before it sends one.
//
// On Windows the Go runtime turns console control events into signals:
// CTRL_C and CTRL_BREAK arrive as os.Interrupt, CTRL_CLOSE, CTRL_LOGOFF and
// CTRL_SHUTDOWN as SIGTERM. The program names them CTRL_C_EVENT and
// CTRL_SHUTDOWN_EVENT; a Linux build reports SIGINT and SIGTERM by the same
// names, so tests read the same output natively and under Wine.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/winproc/winproc/internal/version"
)

const name = "winproc-testapp"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args (without the program name) with console
// control events delivered as signals, and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	p := &program{stdin: stdin, stdout: stdout, stderr: stderr, notify: notifySignals}
	return p.run(args)
}

// program is one run of the command; tests fill notify with their own
// event source.
type program struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// notify starts delivering console control events on the returned
	// channel until stop is called.
	notify func() (events <-chan os.Signal, stop func())
}

func notifySignals() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	return c, func() { signal.Stop(c) }
}

// eventName names the console control event that sig stands for.
func eventName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "CTRL_C_EVENT"
	case syscall.SIGTERM:
		return "CTRL_SHUTDOWN_EVENT"
	}
	return sig.String()
}

const usage = `usage: ` + name + ` [-version] <command> [flags]

commands:
  serve [-addr host:port]  serve HTTP: / /env /healthz /exit?code=N /burn?ms=N /alloc?mb=N
  get URL                  print the body at URL (exit 1 unless 2xx)
  echo                     copy stdin to stdout until EOF
  exit N                   exit with status N (0..255)
  env                      print the environment sorted, then cwd= and user=
  console [-exit-code N]   wait for a console control event, then exit with N
  burn -seconds N          burn CPU on one core for N seconds
  alloc -mb N              allocate and touch N MiB, hold it until a console event
  sleep -seconds N [-ignore-events]
                           wait N seconds (0: until a console event; with
                           -ignore-events, only the time or a kill ends it)
`

var commands = map[string]func(*program, []string) int{
	"serve":   (*program).serve,
	"get":     (*program).get,
	"echo":    (*program).echo,
	"exit":    (*program).exit,
	"env":     (*program).env,
	"console": (*program).console,
	"burn":    (*program).burn,
	"alloc":   (*program).alloc,
	"sleep":   (*program).sleep,
}

func (p *program) run(args []string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(p.stderr)
	fs.Usage = func() { fmt.Fprint(p.stderr, usage) }
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *showVersion {
		fmt.Fprintf(p.stdout, "%s %s\n", name, version.Version)
		return 0
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(p.stderr, "%s: no command\n", name)
		fs.Usage()
		return 2
	}
	cmd, ok := commands[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(p.stderr, "%s: unknown command %q\n", name, fs.Arg(0))
		fs.Usage()
		return 2
	}
	return cmd(p, fs.Args()[1:])
}

// flagSet returns the flag set of command cmd, whose usage line is synopsis.
func (p *program) flagSet(cmd, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(p.stderr)
	fs.Usage = func() {
		fmt.Fprintf(p.stderr, "usage: %s %s %s\n", name, cmd, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a command's args, which take no operands; it returns -1 when
// parsing succeeded, else the exit status.
func (p *program) parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() > 0 {
		return p.usageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	return -1
}

// usageError reports a bad command line and returns exit status 2.
func (p *program) usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(p.stderr, "%s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return 2
}

// flagError is the exit status for a flag parse error, which the flag
// package has already reported: 0 for -h, else 2.
func flagError(err error) int {
	if err == flag.ErrHelp {
		return 0
	}
	return 2
}
