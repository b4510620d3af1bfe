package differ

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/log"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/winbuild"
)

// containerd's garbage-collection labels on content: a manifest names its
// config and its layers (…l.<index>), an index its manifests (…m.<index>).
const (
	gcConfigLabel   = "containerd.io/gc.ref.content.config"
	gcLayerPrefix   = "containerd.io/gc.ref.content.l."
	gcManifestLabel = "containerd.io/gc.ref.content.m."
)

// checkBuild refuses layer when every image manifest that lists it was built
// for a Windows build this host cannot run: the build winbuild.ImageOSVersion
// gives, its config's os.version, else that of an index entry listing the
// manifest, as winimage/resolve judges it for the shim. A layer no manifest
// claims, or one whose images say no build, is let through with a warning: the
// shim checks again, with the image in hand, when it creates the container.
// Apply then refuses only a layer that holds a Windows base
// (refuseBaseLayer).
func (d *Differ) checkBuild(ctx context.Context, layer digest.Digest) error {
	var (
		refused []error
		allowed bool
	)
	err := d.content.Walk(ctx, func(info content.Info) error {
		if !listsLayer(info.Labels, layer) {
			return nil
		}
		osVersion, err := d.imageOSVersion(ctx, info)
		if err != nil {
			return err
		}
		switch err := winbuild.Check(d.imageName(ctx, info.Digest), d.host, osVersion); {
		case err == nil:
			allowed = true
		case errors.Is(err, winbuild.ErrUnknownBuild):
			log.G(ctx).WithField("layer", layer).Warn(err.Error())
			allowed = true
		default:
			refused = append(refused, err)
		}
		return nil
	}, fmt.Sprintf("labels.%q", gcConfigLabel))
	if err != nil {
		return fmt.Errorf("find the images of layer %s: %w", layer, err)
	}
	if allowed || len(refused) == 0 {
		return nil
	}
	return refused[0]
}

func listsLayer(labels map[string]string, layer digest.Digest) bool {
	for k, v := range labels {
		if strings.HasPrefix(k, gcLayerPrefix) && v == layer.String() {
			return true
		}
	}
	return false
}

// imageOSVersion is the build the image of manifest was made for
// (winbuild.ImageOSVersion): its config's os.version, else the os.version
// of the first index entry that lists the manifest and names one.
func (d *Differ) imageOSVersion(ctx context.Context, manifest content.Info) (string, error) {
	config, err := d.configOSVersion(ctx, digest.Digest(manifest.Labels[gcConfigLabel]))
	if err != nil || config != "" {
		return config, err
	}
	entry, err := d.entryOSVersion(ctx, manifest.Digest)
	if err != nil {
		return "", err
	}
	return winbuild.ImageOSVersion(config, entry), nil
}

// entryOSVersion is the os.version of the first index entry for manifest
// that names one: containerd labels an index with the manifests it lists.
func (d *Differ) entryOSVersion(ctx context.Context, manifest digest.Digest) (string, error) {
	var version string
	err := d.content.Walk(ctx, func(info content.Info) error {
		if version != "" || !listsManifest(info.Labels, manifest) {
			return nil
		}
		b, err := content.ReadBlob(ctx, d.content, ocispec.Descriptor{Digest: info.Digest})
		if err != nil {
			return fmt.Errorf("read image index %s: %w", info.Digest, err)
		}
		var index ocispec.Index
		if err := json.Unmarshal(b, &index); err != nil {
			return fmt.Errorf("decode image index %s: %w", info.Digest, err)
		}
		for _, e := range index.Manifests {
			if e.Digest == manifest && e.Platform != nil && e.Platform.OSVersion != "" {
				version = e.Platform.OSVersion
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("find the image indexes of manifest %s: %w", manifest, err)
	}
	return version, nil
}

func listsManifest(labels map[string]string, manifest digest.Digest) bool {
	for k, v := range labels {
		if strings.HasPrefix(k, gcManifestLabel) && v == manifest.String() {
			return true
		}
	}
	return false
}

func (d *Differ) configOSVersion(ctx context.Context, config digest.Digest) (string, error) {
	if config == "" {
		return "", nil
	}
	b, err := content.ReadBlob(ctx, d.content, ocispec.Descriptor{Digest: config})
	if err != nil {
		return "", fmt.Errorf("read image config %s: %w", config, err)
	}
	var img ocispec.Image
	if err := json.Unmarshal(b, &img); err != nil {
		return "", fmt.Errorf("decode image config %s: %w", config, err)
	}
	return img.OSVersion, nil
}

// imageName names the image of manifest for messages: the image record that
// points at it or at an index that lists it, else the manifest digest.
func (d *Differ) imageName(ctx context.Context, manifest digest.Digest) string {
	targets := []digest.Digest{manifest}
	_ = d.content.Walk(ctx, func(info content.Info) error {
		if listsManifest(info.Labels, manifest) {
			targets = append(targets, info.Digest)
		}
		return nil
	})
	if d.images != nil {
		for _, t := range targets {
			imgs, err := d.images.List(ctx, "target.digest=="+t.String())
			if err == nil && len(imgs) > 0 {
				return imgs[0].Name
			}
		}
	}
	return manifest.String()
}

// refuseBaseLayer decides a layer whose images checkBuild refused with
// mismatch: a layer that holds a Windows base OS (registry hives,
// Hives/) is refused, before anything of it is written. Any other layer is
// let through: an image with no Windows base of the host's build cannot
// run process-isolated at all, and the shim refuses such a container at
// create with the same message, while a HostProcess container, which runs
// on the host and not on its image's Windows, may use it (KEP-1981: the
// HostProcess base image and images built on it carry no hives, whatever
// build they name). An image built on a Windows base image (nanoserver,
// servercore) is refused here whatever it is for: its base layer's build
// must be one the host runs.
func (d *Differ) refuseBaseLayer(ctx context.Context, desc ocispec.Descriptor, mismatch error) error {
	base, err := d.holdsWindowsBase(ctx, desc)
	if err != nil {
		return fmt.Errorf("read layer %s for a Windows base: %w", desc.Digest, err)
	}
	if base {
		return mismatch
	}
	log.G(ctx).WithField("layer", desc.Digest).Infof("layer applied although %v: it holds no Windows base, so only HostProcess containers can run its images", mismatch)
	return nil
}

// holdsWindowsBase reports whether the layer's tar has a Hives/ entry:
// headers only, one more read of a layer that is about to be refused.
func (d *Differ) holdsWindowsBase(ctx context.Context, desc ocispec.Descriptor) (bool, error) {
	ra, err := d.content.ReaderAt(ctx, desc)
	if err != nil {
		return false, err
	}
	defer ra.Close()
	dr, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		return false, err
	}
	defer dr.Close()
	tr := tar.NewReader(dr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		name := strings.ToLower(strings.TrimPrefix(strings.ReplaceAll(h.Name, `\`, "/"), "./"))
		if name == strings.ToLower(layermount.HivesDir) || strings.HasPrefix(name, strings.ToLower(layermount.HivesDir)+"/") {
			return true, nil
		}
	}
}
