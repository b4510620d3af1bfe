package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/winproc/winproc/doctor"
)

var doctorCommand = command{
	name:    "doctor",
	summary: "check this node's winproc setup and say how to fix what is wrong",
	run:     runDoctor,
}

const doctorHelp = `
Checks this node's winproc setup and prints each check (OK, WARN or FAIL)
with what it found and, when something is wrong, how to fix it:

  config         containerd's config (and its imports) can be read
  handler        the runtime handler is registered with runtime_type
                 io.containerd.winproc.v2 and the windowsfilter snapshotter
  proxy plugins  windowsfilter (snapshot) and windowsfilter-diff (diff)
  unpack         the transfer service unpacks windows/amd64 layers with them
  shim           containerd-shim-winproc-v2 is where containerd finds it and
                 answers -info
  containerd     containerd answers at -address and its CRI serves the handler
  snapshotter    winproc-snapshotter answers at the proxy plugins' address
  plugins        containerd loaded the windowsfilter snapshotter and differ
  pause image    the handler's pause image is in containerd (namespace
                 -namespace), unpacked, built for the host's Windows build,
                 and holds its entrypoint and C:\Windows\System32\wincat.exe
  state dirs     winproc's state directories are the administrators' only
  hostprocess    HostProcess pods run on winproc (the default handler)
  orphans        (Linux emulation) no compute system is left that no running
                 shim serves and containerd has no task of, as a crash of
                 the shims and containerd leaves them; -fix removes them
  node shutdown  (Windows) containerd depends on winproc-snapshotter, the
                 kubelet on containerd, and the kubelet is before them in
                 PreshutdownOrder (its graceful node shutdown)
  runtimeclass   (with -runtimeclass) the RuntimeClasses naming the handler
                 select this node's build and tolerate os=windows:NoSchedule

Exit status: 0 when no check failed (warnings allowed), 1 otherwise.
`

func runDoctor(ctx context.Context, e *env, args []string) error {
	const prefix = "winproc doctor"
	fs := flag.NewFlagSet(prefix, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nFlags:\n", prefix, strings.TrimSpace(doctorHelp))
		fs.PrintDefaults()
	}
	var (
		o              doctor.Options
		runtimeClasses stringList
		asJSON         bool
	)
	fs.StringVar(&o.ConfigPath, "config", doctor.DefaultConfigPath(), "containerd's config file")
	fs.StringVar(&o.Address, "address", "", "containerd's socket or named pipe (default: the config's grpc address, else containerd's default)")
	fs.StringVar(&o.Handler, "handler", doctor.DefaultHandler, "the CRI runtime handler of winproc")
	fs.StringVar(&o.Namespace, "namespace", doctor.DefaultNamespace, "containerd namespace of the pause image (CRI's)")
	fs.StringVar(&o.HostBuild, "host-build", "", "Windows build to check against, e.g. 10.0.20348 (default: this host's on Windows; else the handler's host_build option, else "+doctor.DefaultEmulatedHostBuild+")")
	fs.StringVar(&o.Shim, "shim", "", "shim binary to check (default: found as containerd finds it: PATH, then beside containerd)")
	fs.Var(&runtimeClasses, "runtimeclass", "RuntimeClass manifest file, YAML or JSON (repeatable)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&o.Fix, "fix", false, "remove the orphans the orphans check finds: kill their processes, unmount them, remove their cgroups and directories")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "time limit of each call to containerd, the snapshotter and the shim")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		// The flag package has printed the problem and the usage.
		return &usageError{}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("%s: unexpected argument %q", prefix, fs.Arg(0)), usage: fs.Usage}
	}
	o.RuntimeClasses = runtimeClasses
	report := doctor.Run(ctx, o)
	write := report.WriteText
	if asJSON {
		write = report.WriteJSON
	}
	if err := write(e.stdout); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if failed := report.Failed(); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, f := range failed {
			names[i] = f.Name
		}
		return fmt.Errorf("%s: %d of %d checks failed: %s", prefix, len(failed), len(report.Checks), strings.Join(names, ", "))
	}
	return nil
}
