package main

// containerd before 2.3 (1.7 among them) starts a shim without the bootstrap
// protocol: it runs
//
//	containerd-shim-winproc-v2 -namespace NS -address ADDR -publish-binary BIN -id ID [-debug] start
//
// in the bundle, with TTRPC_ADDRESS in the environment and, on stdin, the
// runtime options as a protobuf google.protobuf.Any (nothing when there are
// none), and reads the shim's address from stdout: a bare address is a
// version 2 shim, served over ttrpc with task API v2. pkg/shim (v2.4) only
// knows the bootstrap protocol and refuses such a start (errDeprecatedBootstrapAPI,
// also for shim.Run's deprecated Manager); so the shim answers it here with
// the same Manager.Start, the parameters made from the command line.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// maxStdin bounds what `start` reads from stdin, as pkg/shim does.
const maxStdin = 10 << 20

// startArgs is the command line of a `start`.
type startArgs struct {
	namespace, id, address, publishBinary, bundle string
	debug                                         bool
}

// parseStart reads args as pkg/shim does, for a `start` only: ok is false
// for any other action, for a start without namespace, and for flags not
// known here (-v, -info, ...), all of which pkg/shim handles.
func parseStart(args []string) (a startArgs, ok bool) {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&a.debug, "debug", false, "")
	fs.StringVar(&a.namespace, "namespace", "", "")
	fs.StringVar(&a.id, "id", "", "")
	fs.StringVar(&a.address, "address", "", "")
	fs.StringVar(&a.publishBinary, "publish-binary", "", "")
	fs.StringVar(&a.bundle, "bundle", "", "")
	fs.String("socket", "", "")
	fs.String("debug-socket", "", "")
	if err := fs.Parse(args); err != nil || fs.Arg(0) != "start" || a.namespace == "" {
		return startArgs{}, false
	}
	return a, true
}

// legacyParams returns the bootstrap parameters of a start by containerd
// before 2.3, given its stdin; legacy is false when input already is this
// shim's bootstrap parameters (containerd 2.3 and later). Runtime options
// become an extension, as containerd 2.3 sends them.
func legacyParams(a startArgs, input []byte, ttrpcAddress string) (params *bootapi.BootstrapParams, legacy bool, err error) {
	// Runtime options may decode as BootstrapParams too, hence the identity
	// check (as pkg/shim's).
	var bp bootapi.BootstrapParams
	if len(input) > 0 && proto.Unmarshal(input, &bp) == nil && bp.GetInstanceID() == a.id && bp.GetNamespace() == a.namespace {
		return nil, false, nil
	}
	params = &bootapi.BootstrapParams{
		InstanceID:             a.id,
		Namespace:              a.namespace,
		ContainerdGrpcAddress:  a.address,
		ContainerdTtrpcAddress: ttrpcAddress,
		ContainerdBinary:       a.publishBinary,
	}
	if a.debug {
		params.LogLevel = bootapi.LogLevel_LOG_LEVEL_DEBUG
	}
	if len(input) > 0 {
		var opts anypb.Any
		if err := proto.Unmarshal(input, &opts); err != nil || opts.GetTypeUrl() == "" {
			return nil, true, fmt.Errorf("start of %s/%s: stdin holds neither bootstrap parameters nor runtime options", a.namespace, a.id)
		}
		if err := params.AddExtension(&opts); err != nil {
			return nil, true, err
		}
	}
	return params, true, nil
}

// startLegacy serves a `start` by containerd before 2.3 and reports it
// handled. For anything else it returns false, stdin left for pkg/shim to
// read.
func startLegacy(ctx context.Context, s shim.Shim) (handled bool, err error) {
	a, ok := parseStart(os.Args[1:])
	if !ok {
		return false, nil
	}
	input, err := io.ReadAll(io.LimitReader(os.Stdin, maxStdin))
	if err != nil {
		return true, fmt.Errorf("failed to read stdin: %w", err)
	}
	params, legacy, err := legacyParams(a, input, os.Getenv("TTRPC_ADDRESS"))
	if err != nil {
		return true, err
	}
	if !legacy {
		// pkg/shim reads the bootstrap parameters again.
		r, w, err := os.Pipe()
		if err != nil {
			return true, err
		}
		go func() {
			w.Write(input)
			w.Close()
		}()
		os.Stdin = r
		return false, nil
	}

	ctx = namespaces.WithNamespace(ctx, a.namespace)
	ctx = context.WithValue(ctx, shim.OptsKey{}, shim.Opts{BundlePath: a.bundle, Debug: a.debug})
	result, err := s.Start(ctx, params)
	if err != nil {
		return true, err
	}
	// containerd 1.7 reads stdout and stderr together: nothing but the
	// address may be written. (On Windows the new shim's pipe may not exist
	// yet; containerd 1.7's dialer waits for it, up to 5 s.)
	_, err = io.WriteString(os.Stdout, result.GetAddress())
	return true, err
}
