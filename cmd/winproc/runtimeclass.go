package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/winproc/winproc/runtimeclass"
	"github.com/winproc/winproc/winbuild"
)

var runtimeClassCommand = command{
	name:    "runtimeclass",
	summary: "print Kubernetes RuntimeClass manifests for the winproc handler",
	run:     runRuntimeClass,
}

// hostBuild reads this host's Windows build for -host; tests replace it.
var hostBuild = winbuild.Host

const runtimeClassHelp = `
Prints, as YAML for kubectl apply, the node.k8s.io/v1 RuntimeClass that
runs pods with the containerd runtime handler -handler on Windows amd64
nodes of one Windows build: the nodeSelector kubernetes.io/os=windows,
kubernetes.io/arch=amd64 and node.kubernetes.io/windows-build=<build>, and
the toleration os=windows:NoSchedule. Pods select it by runtimeClassName.

The build is -build, or this host's with -host (Windows only); with neither,
the RuntimeClasses of every LTSC build (ltsc2019, ltsc2022, ltsc2025), as in
runtimeclass/manifests. -deployment IMAGE adds an example Deployment of the
winproc test app (IMAGE's entrypoint is winproc-testapp.exe) that uses the
RuntimeClass.

Example:
  winproc runtimeclass -build 10.0.20348 | kubectl apply -f -
`

func runRuntimeClass(_ context.Context, e *env, args []string) error {
	const prefix = "winproc runtimeclass"
	fs := flag.NewFlagSet(prefix, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s [-handler NAME] [-build VERSION | -host] [-deployment IMAGE]\n\n%s\n\nFlags:\n", prefix, strings.TrimSpace(runtimeClassHelp))
		fs.PrintDefaults()
	}
	var (
		handler, build, image string
		host                  bool
	)
	fs.StringVar(&handler, "handler", runtimeclass.DefaultHandler, "containerd runtime handler name (a DNS label), as in containerd's config")
	fs.StringVar(&build, "build", "", "Windows build of the nodes, e.g. 10.0.20348 (a revision is ignored)")
	fs.BoolVar(&host, "host", false, "use this host's Windows build (Windows only)")
	fs.StringVar(&image, "deployment", "", "also print an example Deployment of the test app IMAGE using the RuntimeClass")
	usageErr := func(format string, args ...any) error {
		return &usageError{msg: prefix + ": " + fmt.Sprintf(format, args...), usage: fs.Usage}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		// The flag package has printed the problem and the usage.
		return &usageError{}
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if err := runtimeclass.ValidateHandler(handler); err != nil {
		return usageErr("-handler: %v", err)
	}
	if build != "" && host {
		return usageErr("-build and -host exclude each other")
	}
	deployment := false
	fs.Visit(func(f *flag.Flag) { deployment = deployment || f.Name == "deployment" })
	if deployment && strings.TrimSpace(image) == "" {
		return usageErr("-deployment needs an image")
	}
	if deployment && build == "" && !host {
		return usageErr("-deployment needs -build or -host: the Deployment uses one RuntimeClass")
	}

	var builds []winbuild.Version
	switch {
	case build != "":
		v, err := winbuild.Parse(build)
		if err != nil {
			return usageErr("-build: %v", err)
		}
		builds = []winbuild.Version{v}
	case host:
		v, err := hostBuild()
		if err != nil {
			return fmt.Errorf("%s: -host: %v", prefix, err)
		}
		builds = []winbuild.Version{v}
	default:
		builds = runtimeclass.LTSC
	}

	var objs []runtime.Object
	for _, b := range builds {
		rc, err := runtimeclass.New(handler, b)
		if err != nil {
			if build != "" {
				return usageErr("%v", err)
			}
			return fmt.Errorf("%s: %v", prefix, err)
		}
		objs = append(objs, rc)
		if deployment {
			objs = append(objs, runtimeclass.ExampleDeployment(rc, image))
		}
	}
	y, err := runtimeclass.YAML(objs...)
	if err != nil {
		return fmt.Errorf("%s: %v", prefix, err)
	}
	_, err = e.stdout.Write(y)
	return err
}
