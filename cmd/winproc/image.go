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

const buildHelp = `
Builds a Windows image for process isolation from directory trees: each
-tree becomes a Windows-format layer whose root is C:\ in the container
(DIR/app/x.exe is C:\app\x.exe). The layers go on a synthetic base layer
(default), on the first tree (-no-base: it becomes the base layer), or on
an image from an OCI layout (-base-layout). Repeat -os-version to build a
multi-build index of the same layers (oci-archive and oci-layout only).

Example:
  winproc image build -os-version 10.0.20348.1 -tree ./app \
    -entrypoint 'C:\app\x.exe' -ref example/app:1.0 -output app.tar
`

func runImageBuild(ctx context.Context, e *env, sc *subcommand, args []string) error {
	fs := sc.flagSet(e, buildHelp)
	var (
		osVersions, trees, envs, labels stringList
		entrypoint, cmd                 argList
		arch, workdir, user             string
		noBase                          bool
		out                             outputFlags
		base                            baseFlags
	)
	fs.Var(&osVersions, "os-version", "Windows os.version of the image, e.g. 10.0.20348.1 (repeatable: an index; with -base-layout: default the base's)")
	fs.Var(&trees, "tree", "directory tree for a layer, root = C:\\ (repeatable, bottom first; at least one)")
	fs.Var(&entrypoint, "entrypoint", `entrypoint: a program path (C:\app.exe) or a JSON array (["C:\\app.exe","-v"])`)
	fs.Var(&cmd, "cmd", "command (arguments of the entrypoint): a single string or a JSON array")
	fs.Var(&envs, "env", "environment variable NAME=VALUE (repeatable)")
	fs.Var(&labels, "label", "label KEY=VALUE (repeatable)")
	fs.StringVar(&workdir, "workdir", "", `working directory, e.g. C:\app`)
	fs.StringVar(&user, "user", "", "user to run as, e.g. ContainerUser")
	fs.StringVar(&arch, "arch", winimage.DefaultArchitecture, "architecture: amd64 or arm64")
	fs.BoolVar(&noBase, "no-base", false, "make the first -tree the base layer instead of adding a synthetic base layer")
	out.register(fs)
	base.register(fs)
	pos, err := sc.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return sc.usageErr(fs, "unexpected argument %q", pos[0])
	}
	format, created, err := out.check(sc, fs, e)
	if err != nil {
		return err
	}
	if len(trees) == 0 {
		return sc.usageErr(fs, "at least one -tree is required")
	}
	if noBase && base.layout != "" {
		return sc.usageErr(fs, "-no-base and -base-layout exclude each other")
	}
	if base.layout == "" && len(osVersions) == 0 {
		return sc.usageErr(fs, "-os-version is required")
	}
	if base.layout != "" && len(osVersions) > 1 {
		return sc.usageErr(fs, "-base-layout takes at most one -os-version (the base's)")
	}
	if len(osVersions) > 1 && format == winimage.FormatDockerArchive {
		return sc.usageErr(fs, "several -os-version make an index, which a docker-archive cannot hold: use -format oci-archive or oci-layout")
	}
	for _, v := range osVersions {
		if _, err := winimage.ParseOSVersion(v); err != nil {
			return sc.usageErr(fs, "-os-version: %v", err)
		}
	}
	cfg := winimage.Config{
		Architecture: arch,
		Entrypoint:   entrypoint.value(),
		Cmd:          cmd.value(),
		Env:          envs,
		WorkingDir:   workdir,
		User:         user,
		Created:      created,
		CreatedBy:    "winproc image build",
	}
	if cfg.Labels, err = parseLabels(labels); err != nil {
		return sc.usageErr(fs, "-label: %v", err)
	}
	for _, kv := range envs {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return sc.usageErr(fs, "-env %q: want NAME=VALUE", kv)
		}
	}
	baseImg, err := base.load(sc, fs, arch)
	if err != nil {
		return err
	}

	var layers []v1.Layer
	for i, t := range trees {
		opts := []winimage.LayerOption{winimage.WithCreated(created)}
		if i == 0 && noBase {
			opts = append(opts, winimage.AsBaseLayer())
		}
		l, err := winimage.LayerFromTree(ctx, t, opts...)
		if err != nil {
			return sc.fail(err)
		}
		layers = append(layers, l)
	}
	if baseImg != nil {
		if len(osVersions) == 1 {
			cfg.OSVersion = osVersions[0]
		}
		img, err := winimage.Append(baseImg, cfg, layers...)
		if err != nil {
			return sc.fail(err)
		}
		return write(ctx, e, sc, &out, format, img)
	}
	if !noBase {
		bl, err := winimage.SyntheticBaseLayer(ctx, created)
		if err != nil {
			return sc.fail(err)
		}
		layers = append([]v1.Layer{bl}, layers...)
	}
	var imgs []v1.Image
	for _, v := range osVersions {
		c := cfg
		c.OSVersion = v
		img, err := winimage.Build(c, layers...)
		if err != nil {
			return sc.fail(err)
		}
		imgs = append(imgs, img)
	}
	if len(imgs) == 1 {
		return write(ctx, e, sc, &out, format, imgs[0])
	}
	idx, err := winimage.NewIndex(imgs...)
	if err != nil {
		return sc.fail(err)
	}
	return write(ctx, e, sc, &out, format, idx)
}

func parseLabels(l []string) (map[string]string, error) {
	if len(l) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(l))
	for _, kv := range l {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want KEY=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
}

const pauseHelp = `
Builds the pod infrastructure image, laid out like Kubernetes' Windows pause
image: pause.exe at C:\pause.exe (the entrypoint) and wincat.exe at
C:\Windows\System32\wincat.exe, on a synthetic base layer (default; needs
-os-version) or on a base image from an OCI layout such as nanoserver
(-base-layout; the image keeps the base's os.version).

Example:
  winproc image pause -pause-exe bin/windows/pause.exe \
    -wincat-exe bin/windows/wincat.exe -base-layout ./nanoserver \
    -host-build 10.0.20348 -ref example/pause:1.0 -output pause.tar
`

func runImagePause(ctx context.Context, e *env, sc *subcommand, args []string) error {
	fs := sc.flagSet(e, pauseHelp)
	var (
		opts      winimage.PauseOptions
		osVersion string
		out       outputFlags
		base      baseFlags
	)
	fs.StringVar(&opts.PauseExe, "pause-exe", "", "pause.exe to put at C:\\pause.exe (required)")
	fs.StringVar(&opts.WincatExe, "wincat-exe", "", "wincat.exe to put at C:\\Windows\\System32\\wincat.exe (required)")
	fs.StringVar(&osVersion, "os-version", "", "Windows os.version, e.g. 10.0.20348.1 (required without -base-layout; with it, default the base's)")
	fs.StringVar(&opts.Architecture, "arch", winimage.DefaultArchitecture, "architecture: amd64 or arm64")
	out.register(fs)
	base.register(fs)
	pos, err := sc.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return sc.usageErr(fs, "unexpected argument %q", pos[0])
	}
	format, created, err := out.check(sc, fs, e)
	if err != nil {
		return err
	}
	if opts.PauseExe == "" || opts.WincatExe == "" {
		return sc.usageErr(fs, "-pause-exe and -wincat-exe are required")
	}
	if osVersion == "" && base.layout == "" {
		return sc.usageErr(fs, "-os-version is required without -base-layout")
	}
	if osVersion != "" {
		if _, err := winimage.ParseOSVersion(osVersion); err != nil {
			return sc.usageErr(fs, "-os-version: %v", err)
		}
	}
	opts.OSVersion, opts.Created = osVersion, created
	if opts.Base, err = base.load(sc, fs, opts.Architecture); err != nil {
		return err
	}
	img, err := winimage.PauseImage(ctx, opts)
	if err != nil {
		return sc.fail(err)
	}
	return write(ctx, e, sc, &out, format, img)
}

const inspectHelp = `
Describes the images of a docker-archive tar, an OCI layout tar or an OCI
layout directory: names, index entries with their platform and os.version,
configs and layers, and inconsistencies (missing blobs, an index os.version
that disagrees with the config, ...). With -host-build it also says which
image a host of that build would run (winbuild.BestManifest).
`

func runImageInspect(ctx context.Context, e *env, sc *subcommand, args []string) error {
	fs := sc.flagSet(e, inspectHelp)
	var hostBuild, arch string
	fs.StringVar(&hostBuild, "host-build", "", "show the image a host of this Windows build (e.g. 10.0.20348) would use")
	fs.StringVar(&arch, "arch", winimage.DefaultArchitecture, "architecture of that host")
	pos, err := sc.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return sc.usageErr(fs, "want exactly one FILE or LAYOUT, got %d arguments", len(pos))
	}
	var host *winbuild.Version
	if hostBuild != "" {
		h, err := winbuild.Parse(hostBuild)
		if err != nil {
			return sc.usageErr(fs, "-host-build: %v", err)
		}
		host = &h
	}
	ins, err := winimage.Inspect(pos[0])
	if err != nil {
		return sc.fail(err)
	}
	printInspection(e.stdout, pos[0], ins, host, arch)
	return nil
}

func describePlatform(p *v1.Platform) string {
	if p == nil {
		return "(no platform)"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	if p.OSVersion == "" {
		if strings.EqualFold(p.OS, "windows") {
			s += " (no os.version)"
		}
		return s
	}
	s += " " + p.OSVersion
	if v, err := winbuild.Parse(p.OSVersion); err == nil && v.Major == 10 && v.Minor == 0 {
		if r := winbuild.Release(v.Build); r != "" {
			s += " (" + r + ")"
		}
	}
	return s
}

func printInspection(w io.Writer, path string, ins *winimage.Inspection, host *winbuild.Version, arch string) {
	fmt.Fprintf(w, "%s: %s, %d entries\n", path, ins.Format, len(ins.Entries))
	for _, e := range ins.Entries {
		name := "(unnamed)"
		if len(e.Names) > 0 {
			name = strings.Join(e.Names, ", ")
		}
		fmt.Fprintf(w, "\n%s\n", name)
		printEntry(w, e, "  ")
		if host != nil {
			if best, err := e.Best(*host, arch); err != nil {
				fmt.Fprintf(w, "  host %s: %v\n", host.Label(), err)
			} else {
				fmt.Fprintf(w, "  host %s runs %s (%s)\n", host.Label(), entryID(best), describePlatform(best.Platform()))
			}
		}
	}
}

// entryID is the manifest digest, or the config digest in a docker-archive.
func entryID(e *winimage.Entry) string {
	if e.Descriptor.MediaType == "" && e.Config != nil {
		return "config " + e.ConfigDigest.String()
	}
	return e.Descriptor.Digest.String()
}

func printEntry(w io.Writer, e *winimage.Entry, indent string) {
	d := e.Descriptor
	switch {
	case e.IsIndex():
		fmt.Fprintf(w, "%sindex %s (%s, %d bytes)\n", indent, d.Digest, d.MediaType, d.Size)
		for _, c := range e.Manifests {
			printEntry(w, c, indent+"  ")
		}
	case e.Config != nil:
		if d.MediaType != "" {
			fmt.Fprintf(w, "%smanifest %s %s (%s, %d bytes)\n", indent, d.Digest, describePlatform(d.Platform), d.MediaType, d.Size)
		} else {
			fmt.Fprintf(w, "%simage\n", indent)
		}
		cf := e.Config
		fmt.Fprintf(w, "%s  config %s %s", indent, e.ConfigDigest, describePlatform(cf.Platform()))
		if !cf.Created.IsZero() {
			fmt.Fprintf(w, ", created %s", cf.Created.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		c := cf.Config
		for _, f := range []struct {
			name string
			val  any
			set  bool
		}{
			{"entrypoint", c.Entrypoint, c.Entrypoint != nil},
			{"cmd", c.Cmd, c.Cmd != nil},
			{"env", c.Env, len(c.Env) > 0},
			{"workdir", c.WorkingDir, c.WorkingDir != ""},
			{"user", c.User, c.User != ""},
			{"labels", c.Labels, len(c.Labels) > 0},
		} {
			if f.set {
				b, _ := json.Marshal(f.val)
				fmt.Fprintf(w, "%s    %s %s\n", indent, f.name, b)
			}
		}
		for _, l := range e.Layers {
			ld := l.Descriptor
			fmt.Fprintf(w, "%s  layer %s %d bytes", indent, ld.Digest, ld.Size)
			if ld.MediaType != "" {
				fmt.Fprintf(w, " %s", ld.MediaType)
			}
			if l.File != "" {
				fmt.Fprintf(w, " file %s", l.File)
			}
			if l.DiffID != (v1.Hash{}) {
				fmt.Fprintf(w, " diff %s", l.DiffID)
			}
			if l.Missing {
				fmt.Fprint(w, " (not present)")
			}
			fmt.Fprintln(w)
		}
	default:
		fmt.Fprintf(w, "%s%s %s\n", indent, d.MediaType, d.Digest)
	}
	for _, p := range e.Problems {
		fmt.Fprintf(w, "%s  PROBLEM: %s\n", indent, p)
	}
}
