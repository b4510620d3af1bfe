package differ

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/log"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

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
// for a Windows build this host cannot run. A layer no manifest claims, or
// one whose images declare no os.version, is let through with a warning: the
// shim checks again, with the image in hand, when it creates the container.
func (d *Differ) checkBuild(ctx context.Context, layer digest.Digest) error {
	var (
		refused []error
		allowed bool
	)
	err := d.content.Walk(ctx, func(info content.Info) error {
		if !listsLayer(info.Labels, layer) {
			return nil
		}
		osVersion, err := d.configOSVersion(ctx, digest.Digest(info.Labels[gcConfigLabel]))
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
		for k, v := range info.Labels {
			if strings.HasPrefix(k, gcManifestLabel) && v == manifest.String() {
				targets = append(targets, info.Digest)
			}
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
