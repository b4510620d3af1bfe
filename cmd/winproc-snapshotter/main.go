// Command winproc-snapshotter serves the windowsfilter snapshotter and layer
// differ to containerd as proxy plugins on one socket (named pipe on Windows).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/version"
	"github.com/winproc/winproc/snapshotter/service"
	"github.com/winproc/winproc/winbuild"
)

func main() {
	var (
		cfg         service.Config
		hostBuild   string
		logLevel    string
		logFile     string
		showVersion bool
	)
	flag.StringVar(&cfg.Root, "root", defaultRoot, "directory for snapshots and their metadata")
	flag.StringVar(&cfg.Address, "address", defaultAddress, "address containerd reaches this service on")
	flag.StringVar(&cfg.ContainerdAddress, "containerd-address", defaultContainerdAddress, "containerd's gRPC address, for reading layers")
	flag.StringVar(&hostBuild, "host-build", defaultHostBuild, "Windows build images must be able to run on, e.g. 10.0.20348 (empty: this host's)")
	flag.StringVar(&logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	flag.StringVar(&logFile, "log-file", "", "append logs to this file instead of standard error (a Windows service has none)")
	flag.BoolVar(&showVersion, "version", false, "print the version and exit")
	flag.Parse()
	if showVersion {
		fmt.Println("winproc-snapshotter", version.Version)
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "winproc-snapshotter: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	if err := log.SetLevel(logLevel); err != nil {
		fmt.Fprintf(os.Stderr, "winproc-snapshotter: -log-level: %v\n", err)
		os.Exit(2)
	}

	if logFile != "" {
		f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(os.Stderr, "winproc-snapshotter: -log-file: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
		log.L.Logger.SetOutput(f)
	}

	var err error
	if hostBuild == "" {
		cfg.Host, err = winbuild.Host()
	} else {
		cfg.Host, err = winbuild.Parse(hostBuild)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "winproc-snapshotter: host build: %v\n", err)
		os.Exit(2)
	}

	serve := func(ctx context.Context) error { return service.Run(ctx, cfg) }
	isService, err := runAsService(serve)
	if !isService {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = serve(ctx)
	}
	if err != nil {
		log.L.WithError(err).Error("winproc-snapshotter failed")
		os.Exit(1)
	}
}
