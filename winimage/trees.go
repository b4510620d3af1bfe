package winimage

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TreesOptions describe an image made of directory trees, each one layer
// whose root is C:\ in the container.
type TreesOptions struct {
	// Config is the image's configuration; its OSVersion is ignored (see
	// OSVersions).
	Config Config
	// Trees are the layers' directories, bottom first; at least one.
	Trees []string
	// Base is an operator-supplied base image the trees go on. Without
	// one, they go on a synthetic base layer, or with NoBase the first
	// tree is the base layer.
	Base   v1.Image
	NoBase bool
	// OSVersions are the Windows builds to build for: one image, or an
	// index of one image per build over the same layers. With Base at most
	// one, and none keeps the base's.
	OSVersions []string
	// Created dates the layers' entries.
	Created time.Time
}

// BuildTrees builds the image (or index) o describes: the policy behind
// `winproc image build`.
func BuildTrees(ctx context.Context, o TreesOptions) (Artifact, error) {
	switch {
	case len(o.Trees) == 0:
		return nil, fmt.Errorf("an image needs at least one tree")
	case o.Base != nil && o.NoBase:
		return nil, fmt.Errorf("a base image and a first tree as the base layer exclude each other")
	case o.Base != nil && len(o.OSVersions) > 1:
		return nil, fmt.Errorf("an image on a base image has the base's build: give at most one os.version, not %d", len(o.OSVersions))
	case o.Base == nil && len(o.OSVersions) == 0:
		return nil, fmt.Errorf("an image without a base image needs an os.version")
	}
	var layers []v1.Layer
	for i, t := range o.Trees {
		opts := []LayerOption{WithCreated(o.Created)}
		if i == 0 && o.NoBase {
			opts = append(opts, AsBaseLayer())
		}
		l, err := LayerFromTree(ctx, t, opts...)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	cfg := o.Config
	if o.Base != nil {
		cfg.OSVersion = ""
		if len(o.OSVersions) == 1 {
			cfg.OSVersion = o.OSVersions[0]
		}
		return Append(o.Base, cfg, layers...)
	}
	if !o.NoBase {
		bl, err := SyntheticBaseLayer(ctx, o.Created)
		if err != nil {
			return nil, err
		}
		layers = append([]v1.Layer{bl}, layers...)
	}
	var imgs []v1.Image
	for _, v := range o.OSVersions {
		cfg.OSVersion = v
		img, err := Build(cfg, layers...)
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, img)
	}
	if len(imgs) == 1 {
		return imgs[0], nil
	}
	return NewIndex(imgs...)
}
