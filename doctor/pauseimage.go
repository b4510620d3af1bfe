package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/internal/wincmdline"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/shim/winpath"
	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage"
	"github.com/winproc/winproc/winimage/resolve"
)

// pauseImageName is the pause image the handler's pods use and where that
// is configured.
func (d *run) pauseImageName() (string, string) {
	if d.rt == nil {
		return options.DefaultPauseImage, "the shim's default (the handler is not registered)"
	}
	if d.rt.Sandboxer == "shim" {
		if asString(d.rt.Options["pause_image"]) != "" {
			return d.shimOpts.PauseImage, "the handler's pause_image option"
		}
		return options.DefaultPauseImage, "the shim's default; set pause_image in the handler's options"
	}
	// podsandbox: containerd's CRI runs the sandbox image itself.
	if d.cfg != nil && d.cfg.SandboxImage != "" {
		return d.cfg.SandboxImage, "containerd's CRI sandbox image (sandboxer podsandbox)"
	}
	return options.DefaultPauseImage, "containerd's default CRI sandbox image (sandboxer podsandbox)"
}

// pauseFix is how to build this host's pause image and import it.
func (d *run) pauseFix(ref string) []string {
	var build string
	if d.goos == "windows" {
		build = fmt.Sprintf(`winproc image pause -pause-exe pause.exe -wincat-exe wincat.exe -base-layout NANOSERVER_OCI_LAYOUT -host-build %s -ref %s -output pause.tar`, d.host.Label(), ref)
	} else {
		build = fmt.Sprintf(`winproc image pause -pause-exe pause.exe -wincat-exe wincat.exe -os-version %s.1 -ref %s -output pause.tar`, d.host.Label(), ref)
	}
	return []string{
		"build a pause image for this node's build " + describeBuild(d.host) + ": " + build,
		"and import it: " + d.importCommand("pause.tar"),
	}
}

// importCommand imports an image archive unpacked for winproc.
func (d *run) importCommand(archive string) string {
	ctr := "ctr"
	if d.address != defaultAddress(d.goos) {
		ctr += " -a " + d.address
	}
	return fmt.Sprintf("%s -n %s images import --platform %s --snapshotter %s %s", ctr, d.o.Namespace, layerPlatform, snapshotterName, archive)
}

// wincatPath is where a pause image has wincat.exe, below C:\ with '/'.
const wincatPath = winimage.WincatExePath

func (d *run) checkPauseImage(ctx context.Context) {
	name, source := d.pauseImageName()
	if r := d.pauseImageUnchecked(name); r != nil {
		d.add(*r)
		return
	}
	r := Result{Name: CheckPauseImage}
	ns := d.o.Namespace
	fix := d.pauseFix(name)
	setOption := fmt.Sprintf("or set pause_image in [%s.options] to an image built for %s", d.cfg.RuntimeTable(d.o.Handler), describeBuild(d.host))
	fail := func(msg string, fix ...string) {
		r.Status, r.Summary, r.Fix = Fail, msg, fix
		r.Details = append([]string{"from " + source}, r.Details...)
		d.add(r)
	}

	cctx, cancel := d.ctx(ctx)
	defer cancel()
	target, err := d.cd.ImageTarget(cctx, ns, name)
	if errdefs.IsNotFound(err) {
		fail(fmt.Sprintf("pause image %q is not in containerd (namespace %s)", name, ns),
			append(fix, fmt.Sprintf("or pull it, if a registry has it for %s: crictl pull %s", describeBuild(d.host), name))...)
		return
	}
	if err != nil {
		fail(fmt.Sprintf("look up pause image %q: %v", name, err))
		return
	}
	img, err := resolve.ForHost(cctx, d.cd.Content(ns), target, d.host)
	if err != nil {
		fail(fmt.Sprintf("pause image %q: %v", name, err), append(fix, setOption)...)
		return
	}
	if img.Config.OS != "" && !strings.EqualFold(img.Config.OS, "windows") {
		fail(fmt.Sprintf("pause image %q is a %s/%s image; Windows pods need a Windows pause image", name, img.Config.OS, img.Config.Architecture), append(fix, setOption)...)
		return
	}
	var problems []issue
	buildErr := winbuild.Check(name, d.host, img.OSVersion)
	switch {
	case errors.Is(buildErr, winbuild.ErrUnknownBuild):
		problems = append(problems, issue{Warn, buildErr.Error(), append(fix, setOption)})
	case buildErr != nil:
		problems = append(problems, issue{Fail, buildErr.Error(), append(fix, setOption)})
	}
	snap, _ := d.snapshotter()
	if buildErr == nil {
		problems = append(problems, d.pauseSnapshotIssues(cctx, name, snap, img)...)
	}
	has, notes, fileProblems := d.pauseFiles(ctx, name, img, fix)
	problems = append(problems, fileProblems...)

	r.Summary = fmt.Sprintf("%s: windows/%s %s, snapshotter %s", name, img.Config.Architecture, orNone(img.OSVersion), snap)
	if len(has) > 0 {
		r.Summary += ", has " + strings.Join(has, " and ")
	}
	r.Details = append([]string{"from " + source}, notes...)
	r.Details = append(r.Details, fmt.Sprintf("manifest %s, config %s, %d layers", img.Desc.Digest, img.Manifest.Config.Digest, len(img.Manifest.Layers)))
	applyIssues(&r, problems)
	d.add(r)
}

// pauseImageUnchecked is the result of the pause image check when what it
// needs is missing: the host build, the handler, or containerd; nil if it
// can run.
func (d *run) pauseImageUnchecked(name string) *Result {
	switch {
	case d.hostErr != nil:
		return &Result{Name: CheckPauseImage, Status: Fail,
			Summary: fmt.Sprintf("%s: the host build is unknown: %v", name, d.hostErr),
			Fix:     []string{"pass --host-build with the node's Windows build, e.g. 10.0.20348"}}
	case d.cfg != nil && d.rt == nil:
		r := skipped(CheckPauseImage, fmt.Sprintf("the handler %q is not registered, so its pause image is unknown", d.o.Handler))
		return &r
	case !d.cdUp:
		r := skipped(CheckPauseImage, fmt.Sprintf("%s: containerd did not answer", name))
		return &r
	}
	return nil
}

// pauseSnapshotIssues checks that the pause image is unpacked where the shim
// (or CRI) takes the pause rootfs from.
func (d *run) pauseSnapshotIssues(ctx context.Context, name, snap string, img resolve.Image) []issue {
	if len(img.Config.RootFS.DiffIDs) == 0 {
		return nil
	}
	chain := identity.ChainID(img.Config.RootFS.DiffIDs).String()
	err := d.cd.StatSnapshot(ctx, d.o.Namespace, snap, chain)
	switch {
	case errdefs.IsNotFound(err):
		return []issue{{Fail, fmt.Sprintf("pause image %q is not unpacked for snapshotter %s (no snapshot %s)", name, snap, chain),
			[]string{"import its archive again, unpacked (no --no-unpack): " + d.importCommand("ARCHIVE"), fmt.Sprintf("or pull it again: crictl pull %s", name)}}}
	case err != nil:
		return []issue{{Warn, fmt.Sprintf("pause image %q: look up its snapshot in %s: %v", name, snap, err), nil}}
	}
	return nil
}

// pauseFile is a file the pause image needs.
type pauseFile struct{ path, what string } // path below C:\ with '/'

// pauseFiles looks for the files the pause image needs in its layers: the
// entrypoint, and wincat.exe for port-forward. It returns the files found,
// notes for the details, and the problems.
func (d *run) pauseFiles(ctx context.Context, name string, img resolve.Image, fix []string) (has, notes []string, problems []issue) {
	cfg := img.Config.Config
	args := append(append([]string(nil), cfg.Entrypoint...), cfg.Cmd...)
	var want []pauseFile
	switch {
	case len(args) == 0 || strings.TrimSpace(args[0]) == "":
		problems = append(problems, issue{Fail, fmt.Sprintf("pause image %q has neither an entrypoint nor a cmd (Kubernetes' pause image runs C:\\pause.exe)", name), fix})
	default:
		program := args[0]
		if cfg.ArgsEscaped {
			program = wincmdline.Program(program)
		}
		what := "its entrypoint "
		if len(cfg.Entrypoint) == 0 {
			what = "its cmd "
		}
		if c, ok := winpath.SystemDrivePath(program); ok {
			want = append(want, pauseFile{strings.Join(c, "/"), what + program})
		} else {
			notes = append(notes, fmt.Sprintf("entrypoint %s is not an absolute C: path; found through PATH at run time, not looked up", program))
		}
	}
	want = append(want, pauseFile{wincatPath, `C:\Windows\System32\wincat.exe (port-forward runs it)`})
	var paths []string
	for _, w := range want {
		paths = append(paths, w.path)
	}
	// Layers can be large: reading them gets more time than a call.
	lctx, lcancel := context.WithTimeout(ctx, 10*d.timeout)
	defer lcancel()
	layers, store := img.Manifest.Layers, d.cd.Content(d.o.Namespace)
	states, err := FindFiles(len(layers), func(i int) (io.ReadCloser, error) {
		return openLayer(lctx, store, layers[i])
	}, paths)
	if err != nil {
		problems = append(problems, issue{Warn, fmt.Sprintf("pause image %q: its layers could not be read, so pause.exe and wincat.exe are not checked: %v", name, err), nil})
		return has, notes, problems
	}
	for _, w := range want {
		file := `C:\` + strings.ReplaceAll(w.path, "/", `\`)
		switch states[w.path] {
		case FilePresent:
			has = append(has, file)
		case FileUnknown:
			problems = append(problems, issue{Warn, fmt.Sprintf("pause image %q: a link on the path of %s: not checked", name, file), nil})
		default:
			problems = append(problems, issue{Fail, fmt.Sprintf("pause image %q lacks %s", name, w.what), fix})
		}
	}
	return has, notes, problems
}

// openLayer streams a layer blob, decompressed (gzip, zstd or none).
func openLayer(ctx context.Context, store content.Provider, desc ocispec.Descriptor) (io.ReadCloser, error) {
	ra, err := store.ReaderAt(ctx, desc)
	if err != nil {
		if images.IsNonDistributable(desc.MediaType) {
			return nil, fmt.Errorf("foreign layer %s is not in containerd's content store: %w", desc.Digest, err)
		}
		return nil, fmt.Errorf("layer %s: %w", desc.Digest, err)
	}
	dc, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		ra.Close()
		return nil, fmt.Errorf("%s: %w", desc.Digest, err)
	}
	return readCloser{dc, closers{dc, ra}}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
