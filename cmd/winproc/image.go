package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage"
)

var imageCommand = command{
	name:    "image",
	summary: "build and inspect Windows container images (pause image, test images)",
	run:     runImage,
}

type subcommand struct {
	name, args, summary string
	run                 func(ctx context.Context, e *env, sc *subcommand, args []string) error
}

var imageSubcommands []*subcommand

func init() {
	imageSubcommands = []*subcommand{
		{"build", "[flags]", "build an image from directory trees", runImageBuild},
		{"pause", "[flags]", "build the pod infrastructure (pause) image", runImagePause},
		{"inspect", "[flags] FILE|LAYOUT", "describe the images of an archive or OCI layout", runImageInspect},
	}
}

func imageUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: winproc image COMMAND [flags]\n\nCommands:\n")
	for _, sc := range imageSubcommands {
		fmt.Fprintf(w, "  %-8s %s\n", sc.name, sc.summary)
	}
	fmt.Fprintf(w, "\nRun 'winproc image COMMAND -h' for the flags of a command.\n")
}

func runImage(ctx context.Context, e *env, args []string) error {
	usage := func() { imageUsage(e.stderr) }
	if len(args) == 0 {
		return &usageError{msg: "winproc image: missing command", usage: usage}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		imageUsage(e.stdout)
		return nil
	}
	for _, sc := range imageSubcommands {
		if sc.name == args[0] {
			return sc.run(ctx, e, sc, args[1:])
		}
	}
	return &usageError{msg: fmt.Sprintf("winproc image: unknown command %q", args[0]), usage: usage}
}

// prefix is the start of the messages of a subcommand.
func (sc *subcommand) prefix() string { return "winproc image " + sc.name }

func (sc *subcommand) flagSet(e *env, long string) *flag.FlagSet {
	fs := flag.NewFlagSet(sc.prefix(), flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s %s\n\n%s\n\nFlags:\n", sc.prefix(), sc.args, strings.TrimSpace(long))
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; positional arguments may come before, between or
// after the flags. It returns the positional arguments.
func (sc *subcommand) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			// The flag package has printed the problem and the usage.
			return nil, &usageError{}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func (sc *subcommand) usageErr(fs *flag.FlagSet, format string, args ...any) error {
	return &usageError{msg: sc.prefix() + ": " + fmt.Sprintf(format, args...), usage: fs.Usage}
}

func (sc *subcommand) fail(err error) error {
	return fmt.Errorf("%s: %s", sc.prefix(), strings.ReplaceAll(err.Error(), "\n", "; "))
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// argList is an entrypoint or cmd: a JSON array, or a single program path
// (Windows paths need no escaping then: C:\pause.exe).
type argList struct {
	set  bool
	args []string
}

func (a *argList) String() string {
	if !a.set {
		return ""
	}
	b, _ := json.Marshal(a.args)
	return string(b)
}

func (a *argList) Set(s string) error {
	a.set = true
	if strings.HasPrefix(strings.TrimSpace(s), "[") {
		var l []string
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			return fmt.Errorf("not a JSON array of strings: %v", err)
		}
		a.args = l
		return nil
	}
	a.args = []string{s}
	return nil
}

func (a *argList) value() []string {
	if !a.set {
		return nil
	}
	if a.args == nil {
		return []string{}
	}
	return a.args
}

// outputFlags are the flags saying what to write where.
type outputFlags struct {
	ref, output, format, created string
}

func (o *outputFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.ref, "ref", "", "image reference to name the image, e.g. example/pause:1.0 (required)")
	fs.StringVar(&o.output, "output", "", "file (archives) or directory (oci-layout) to write (required)")
	fs.StringVar(&o.format, "format", string(winimage.FormatOCIArchive), "output format: docker-archive, oci-archive or oci-layout")
	fs.StringVar(&o.created, "created", "", "time written into the image, RFC 3339 or Unix seconds (default: $SOURCE_DATE_EPOCH, else the Unix epoch)")
}

// check validates the flags and returns the format and creation time.
func (o *outputFlags) check(sc *subcommand, fs *flag.FlagSet, e *env) (winimage.Format, time.Time, error) {
	if o.ref == "" {
		return "", time.Time{}, sc.usageErr(fs, "-ref is required")
	}
	if o.output == "" {
		return "", time.Time{}, sc.usageErr(fs, "-output is required")
	}
	format, err := winimage.ParseFormat(o.format)
	if err != nil {
		return "", time.Time{}, sc.usageErr(fs, "-format: %v", err)
	}
	created, src := o.created, "-created"
	if created == "" {
		created, src = e.getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH"
	}
	t := winimage.DefaultCreated
	if created != "" {
		if t, err = parseTime(created); err != nil {
			return "", time.Time{}, sc.usageErr(fs, "%s: %v", src, err)
		}
	}
	return format, t, nil
}

func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor Unix seconds", s)
	}
	return t.UTC(), nil
}

// baseFlags select an operator-supplied base image.
type baseFlags struct {
	layout, ref, hostBuild string
}

func (b *baseFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.layout, "base-layout", "", "OCI image layout directory holding the base image (e.g. nanoserver); default: a synthetic base layer")
	fs.StringVar(&b.ref, "base-ref", "", "name of the base image in -base-layout, if it holds several")
	fs.StringVar(&b.hostBuild, "host-build", "", "Windows build the image must run on, e.g. 10.0.20348, to pick the base from an index (default: this host's, on Windows)")
}

// load returns the base image, nil without -base-layout.
func (b *baseFlags) load(sc *subcommand, fs *flag.FlagSet, arch string) (v1.Image, error) {
	if b.layout == "" {
		if b.ref != "" || b.hostBuild != "" {
			return nil, sc.usageErr(fs, "-base-ref and -host-build need -base-layout")
		}
		return nil, nil
	}
	var host winbuild.Version
	var err error
	if b.hostBuild != "" {
		if host, err = winbuild.Parse(b.hostBuild); err != nil {
			return nil, sc.usageErr(fs, "-host-build: %v", err)
		}
	} else if host, err = winbuild.Host(); err != nil {
		return nil, sc.usageErr(fs, "-host-build is required with -base-layout on %s", runtime.GOOS)
	}
	img, err := winimage.LoadBase(b.layout, host, arch, b.ref)
	if err != nil {
		return nil, sc.fail(err)
	}
	return img, nil
}

// write writes a and reports what was written on stdout.
func write(ctx context.Context, e *env, sc *subcommand, o *outputFlags, format winimage.Format, a winimage.Artifact) error {
	if err := winimage.Write(ctx, o.output, format, o.ref, a); err != nil {
		return sc.fail(err)
	}
	d, err := a.Digest()
	if err != nil {
		return sc.fail(err)
	}
	id := d.String()
	what := " (index)"
	if img, ok := a.(v1.Image); ok {
		cf, err := img.ConfigFile()
		if err != nil {
			return sc.fail(err)
		}
		what = " " + describePlatform(cf.Platform())
		if format == winimage.FormatDockerArchive {
			// containerd and Docker make up their own manifest; the
			// config digest (Docker's image ID) is what stays.
			cd, err := img.ConfigName()
			if err != nil {
				return sc.fail(err)
			}
			id = "config " + cd.String()
		}
	}
	fmt.Fprintf(e.stdout, "wrote %s %s: %s %s%s\n", format, o.output, o.ref, id, what)
	return nil
}
