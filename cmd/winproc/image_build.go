package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/winproc/winproc/winimage"
)

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
	format, created, err := parseOutputCommand(e, sc, fs, args, &out, &base)
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
	a, err := winimage.BuildTrees(ctx, winimage.TreesOptions{Config: cfg, Trees: trees, Base: baseImg, NoBase: noBase, OSVersions: osVersions, Created: created})
	if err != nil {
		return sc.fail(err)
	}
	return write(ctx, e, sc, &out, format, a)
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
	format, created, err := parseOutputCommand(e, sc, fs, args, &out, &base)
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

// parseOutputCommand registers the output and base flags of a command that
// writes an image, parses args (no positional ones) and checks the output.
func parseOutputCommand(e *env, sc *subcommand, fs *flag.FlagSet, args []string, out *outputFlags, base *baseFlags) (winimage.Format, time.Time, error) {
	out.register(fs)
	base.register(fs)
	pos, err := sc.parse(fs, args)
	if err != nil {
		return "", time.Time{}, err
	}
	if len(pos) > 0 {
		return "", time.Time{}, sc.usageErr(fs, "unexpected argument %q", pos[0])
	}
	return out.check(sc, fs, e)
}
