package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

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
)

// pauseArch is the architecture of the pause image manifests considered.
const pauseArch = "amd64"

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
	r := Result{Name: CheckPauseImage}
	if d.hostErr != nil {
		r.Status, r.Summary = Fail, fmt.Sprintf("%s: the host build is unknown: %v", name, d.hostErr)
		r.Fix = []string{"pass --host-build with the node's Windows build, e.g. 10.0.20348"}
		d.add(r)
		return
	}
	if d.cfg != nil && d.rt == nil {
		d.add(skipped(CheckPauseImage, fmt.Sprintf("the handler %q is not registered, so its pause image is unknown", d.o.Handler)))
		return
	}
	if !d.cdUp {
		d.add(skipped(CheckPauseImage, fmt.Sprintf("%s: containerd did not answer", name)))
		return
	}
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
	img, err := resolveImage(cctx, d.cd, ns, target, d.host)
	if err != nil {
		fail(fmt.Sprintf("pause image %q: %v", name, err), append(fix, setOption)...)
		return
	}
	if img.config.OS != "" && !strings.EqualFold(img.config.OS, "windows") {
		fail(fmt.Sprintf("pause image %q is a %s/%s image; Windows pods need a Windows pause image", name, img.config.OS, img.config.Architecture), append(fix, setOption)...)
		return
	}
	var problems []issue
	buildErr := winbuild.Check(name, d.host, img.osVersion)
	switch {
	case errors.Is(buildErr, winbuild.ErrUnknownBuild):
		problems = append(problems, issue{Warn, buildErr.Error(), append(fix, setOption)})
	case buildErr != nil:
		problems = append(problems, issue{Fail, buildErr.Error(), append(fix, setOption)})
	}

	// Unpacked where the shim (or CRI) takes the pause rootfs from.
	snap, _ := d.snapshotter()
	if buildErr == nil && len(img.config.RootFS.DiffIDs) > 0 {
		chain := identity.ChainID(img.config.RootFS.DiffIDs).String()
		err := d.cd.StatSnapshot(cctx, ns, snap, chain)
		switch {
		case errdefs.IsNotFound(err):
			problems = append(problems, issue{Fail, fmt.Sprintf("pause image %q is not unpacked for snapshotter %s (no snapshot %s)", name, snap, chain),
				[]string{"import its archive again, unpacked (no --no-unpack): " + d.importCommand("ARCHIVE"), fmt.Sprintf("or pull it again: crictl pull %s", name)}})
		case err != nil:
			problems = append(problems, issue{Warn, fmt.Sprintf("pause image %q: look up its snapshot in %s: %v", name, snap, err), nil})
		}
	}

	// The files: the entrypoint, and wincat.exe for port-forward.
	args := append(append([]string(nil), img.config.Config.Entrypoint...), img.config.Config.Cmd...)
	type wanted struct{ path, what string } // path below C:\ with '/'
	var want []wanted
	switch {
	case len(args) == 0 || strings.TrimSpace(args[0]) == "":
		problems = append(problems, issue{Fail, fmt.Sprintf("pause image %q has neither an entrypoint nor a cmd (Kubernetes' pause image runs C:\\pause.exe)", name), fix})
	default:
		program := args[0]
		if img.config.Config.ArgsEscaped {
			program = wincmdline.Program(program)
		}
		what := "its entrypoint "
		if len(img.config.Config.Entrypoint) == 0 {
			what = "its cmd "
		}
		if c, ok := winpath.SystemDrivePath(program); ok {
			want = append(want, wanted{strings.Join(c, "/"), what + program})
		} else {
			r.Details = append(r.Details, fmt.Sprintf("entrypoint %s is not an absolute C: path; found through PATH at run time, not looked up", program))
		}
	}
	want = append(want, wanted{wincatPath, `C:\Windows\System32\wincat.exe (port-forward runs it)`})
	var paths []string
	for _, w := range want {
		paths = append(paths, w.path)
	}
	// Layers can be large: reading them gets more time than a call.
	lctx, lcancel := context.WithTimeout(ctx, 10*d.timeout)
	defer lcancel()
	layers := img.manifest.Layers
	states, err := FindFiles(len(layers), func(i int) (io.ReadCloser, error) {
		return openLayer(lctx, d.cd, ns, layers[i])
	}, paths)
	var has []string
	if err != nil {
		problems = append(problems, issue{Warn, fmt.Sprintf("pause image %q: its layers could not be read, so pause.exe and wincat.exe are not checked: %v", name, err), nil})
	} else {
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
	}

	r.Summary = fmt.Sprintf("%s: windows/%s %s, snapshotter %s", name, img.config.Architecture, orNone(img.osVersion), snap)
	if len(has) > 0 {
		r.Summary += ", has " + strings.Join(has, " and ")
	}
	r.Details = append([]string{"from " + source}, r.Details...)
	r.Details = append(r.Details, fmt.Sprintf("manifest %s, config %s, %d layers", img.desc.Digest, img.manifest.Config.Digest, len(layers)))
	applyIssues(&r, problems)
	d.add(r)
}

// openLayer streams a layer blob, decompressed (gzip, zstd or none).
func openLayer(ctx context.Context, cd Containerd, ns string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := cd.OpenBlob(ctx, ns, desc)
	if err != nil {
		if images.IsNonDistributable(desc.MediaType) {
			return nil, fmt.Errorf("foreign layer %s is not in containerd's content store: %w", desc.Digest, err)
		}
		return nil, fmt.Errorf("layer %s: %w", desc.Digest, err)
	}
	dc, err := compression.DecompressStream(rc)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: %w", desc.Digest, err)
	}
	return readCloser{dc, closers{dc, rc}}, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// resolvedImage is the image as this host runs it.
type resolvedImage struct {
	desc      ocispec.Descriptor // the manifest's
	manifest  ocispec.Manifest
	config    ocispec.Image
	osVersion string
}

// blobReader reads content blobs.
type blobReader interface {
	ReadBlob(ctx context.Context, namespace string, desc ocispec.Descriptor) ([]byte, error)
}

// resolveImage reads target's manifest for host (the best of an index, as
// the shim picks it) and its config.
func resolveImage(ctx context.Context, store blobReader, ns string, target ocispec.Descriptor, host winbuild.Version) (resolvedImage, error) {
	var platformVersion string
	if images.IsIndexType(target.MediaType) {
		var index ocispec.Index
		if err := readJSON(ctx, store, ns, target, &index); err != nil {
			return resolvedImage{}, fmt.Errorf("read its index: %w", err)
		}
		best, err := winbuild.BestManifest(host, pauseArch, index.Manifests)
		if err != nil {
			return resolvedImage{}, err
		}
		target = best
		if best.Platform != nil {
			platformVersion = best.Platform.OSVersion
		}
	}
	if !images.IsManifestType(target.MediaType) {
		return resolvedImage{}, fmt.Errorf("%s is neither an image index nor a manifest (%s)", target.Digest, target.MediaType)
	}
	img := resolvedImage{desc: target}
	if err := readJSON(ctx, store, ns, target, &img.manifest); err != nil {
		return resolvedImage{}, fmt.Errorf("read its manifest: %w", err)
	}
	if err := readJSON(ctx, store, ns, img.manifest.Config, &img.config); err != nil {
		return resolvedImage{}, fmt.Errorf("read its config: %w", err)
	}
	img.osVersion = img.config.OSVersion
	if img.osVersion == "" {
		img.osVersion = platformVersion
	}
	return img, nil
}

func readJSON(ctx context.Context, store blobReader, ns string, desc ocispec.Descriptor, v any) error {
	b, err := store.ReadBlob(ctx, ns, desc)
	if err != nil {
		return fmt.Errorf("%s: %w", desc.Digest, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", desc.Digest, err)
	}
	return nil
}
