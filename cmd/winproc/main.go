// Command winproc is the operator tool of winproc. Each subcommand group
// lives in its own file and registers itself in commands.
//
//	winproc [-version] COMMAND [ARGS]
//
// Exit status: 0 on success, 1 when the command failed, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/winproc/winproc/internal/version"
)

// command is a subcommand group, e.g. "image".
type command struct {
	name    string
	summary string
	// run runs the group with the arguments after its name; it returns a
	// usageError for bad usage (exit 2), any other error for a failure
	// (exit 1).
	run func(ctx context.Context, env *env, args []string) error
}

// commands are the subcommand groups, in usage order.
var commands = []command{
	imageCommand,
	doctorCommand,
	runtimeClassCommand,
}

// env is what a command may use besides its arguments.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

// usageError is bad usage: the message, then the usage of the command.
type usageError struct {
	msg   string
	usage func() // prints the usage of the (sub)command
}

func (e *usageError) Error() string { return e.msg }

// errHelp is returned after -h printed the usage: exit 0.
var errHelp = flag.ErrHelp

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("winproc", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { mainUsage(e.stderr, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(e.stdout, "winproc", version.Version)
		return 0
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(e.stderr, "winproc: missing command")
		fs.Usage()
		return 2
	}
	name := fs.Arg(0)
	if name == "help" {
		mainUsage(e.stdout, fs)
		return 0
	}
	for _, c := range commands {
		if c.name == name {
			return exitCode(e, c.run(ctx, e, fs.Args()[1:]))
		}
	}
	fmt.Fprintf(e.stderr, "winproc: unknown command %q\n", name)
	fs.Usage()
	return 2
}

// exitCode reports err and maps it to the exit status.
func exitCode(e *env, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		if ue.msg != "" {
			fmt.Fprintln(e.stderr, ue.msg)
		}
		if ue.usage != nil {
			ue.usage()
		}
		return 2
	default:
		fmt.Fprintln(e.stderr, strings.ReplaceAll(err.Error(), "\n", "; "))
		return 1
	}
}

func mainUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: winproc [-version] COMMAND [ARGS]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'winproc COMMAND -h' for the usage of a command.\n\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
}
