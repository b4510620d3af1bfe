// Command winproc-demo is `make demo`: winproc end to end on an emulated
// Windows node (Linux, Wine), printed as a terminal transcript. See package
// demo.
//
//	winproc-demo [-tools DIR] [-wine-prefix DIR] [-bin DIR] [-windows-bin DIR]
//
// Exit status: 0 when every step worked and nothing was left behind, 1
// otherwise, 2 on a usage error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/winproc/winproc/demo"
)

func main() {
	cfg := demo.Config{Out: os.Stdout}
	flag.StringVar(&cfg.Tools, "tools", os.Getenv("WINPROC_TOOLS"), "directory holding containerd, ctr and crictl (`make tools`; default $WINPROC_TOOLS)")
	flag.StringVar(&cfg.WinePrefix, "wine-prefix", os.Getenv("WINPROC_WINE_PREFIX"), "template Wine prefix (`make wine`; default $WINPROC_WINE_PREFIX)")
	flag.StringVar(&cfg.Bin, "bin", "", "directory holding containerd-shim-winproc-v2, winproc-snapshotter and winproc (default: build them)")
	flag.StringVar(&cfg.WindowsBin, "windows-bin", "", "directory holding pause.exe, wincat.exe and winproc-testapp.exe (default: build them)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "winproc-demo: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	// Ctrl-C stops the demo between steps (and the command running), and it
	// cleans up before exiting.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := demo.Run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nwinproc-demo: %v\n", err)
		os.Exit(1)
	}
}
