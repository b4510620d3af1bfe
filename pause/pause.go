// Package pause is the pod's infrastructure process: it holds the pod's
// compute system open while doing nothing, and exits cleanly when Windows
// asks it to stop.
//
// On Windows the Go runtime turns console control events into signals:
// CTRL_C and CTRL_BREAK arrive as os.Interrupt, CTRL_CLOSE, CTRL_LOGOFF and
// CTRL_SHUTDOWN (what HCS sends when it shuts a silo down) as SIGTERM. So the
// same code serves Windows and the Linux build used in tests.
package pause

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Message is printed when a stop event arrives, as Kubernetes' pause does.
const Message = "Shutting down, got signal"

// Run parses args (without the program name) and waits for a stop event or
// for ctx to end. It returns the process exit status: 0 after a stop event or
// -v, 2 for bad flags.
func Run(ctx context.Context, args []string, version string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pause", flag.ContinueOnError)
	fs.SetOutput(stderr)
	showVersion := fs.Bool("v", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pause: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "pause %s\n", version)
		return 0
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stop)
	select {
	case <-stop:
		fmt.Fprintln(stdout, Message)
	case <-ctx.Done():
	}
	return 0
}
