package winimage

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winbuild"
)

// maxIndexDepth bounds nested indexes (index.json -> index -> manifests is
// the usual depth).
const maxIndexDepth = 4

// LoadBase reads the image to build on from the OCI image layout directory
// dir (as written by WriteOCILayout, `crane pull --format=oci`, `skopeo copy
// ... oci:DIR` or an extracted `docker save`/containerd export): see
// SelectImage.
func LoadBase(dir string, host winbuild.Version, arch, ref string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("base layout %s: %w", dir, err)
	}
	img, err := SelectImage(idx, host, arch, ref)
	if err != nil {
		return nil, fmt.Errorf("base layout %s: %w", dir, err)
	}
	return img, nil
}

// leaf is an image manifest found under an index.
type leaf struct {
	desc   v1.Descriptor
	parent v1.ImageIndex
}

// SelectImage returns the image of idx (usually an OCI layout's index.json)
// to build on for host and arch (a GOARCH value, "" for
// DefaultArchitecture).
//
// If ref is not empty, only the top-level entries named ref (by their
// io.containerd.image.name or org.opencontainers.image.ref.name
// annotation) are considered; if it is empty, the top-level entries must
// all have the same name (or none). Nested indexes are flattened, entries
// without a platform get it from their config, and winbuild.BestManifest
// picks the manifest for host by the build each image was made for
// (winbuild.ImageOSVersion: its config's os.version, else its entry's); a
// manifest whose build is known not to run on host is never chosen. If the
// chosen image's config lacks the os.version its descriptor declares, the
// returned image's config gets it.
func SelectImage(idx v1.ImageIndex, host winbuild.Version, arch, ref string) (v1.Image, error) {
	if arch == "" {
		arch = DefaultArchitecture
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	top, err := selectNamed(im.Manifests, ref)
	if err != nil {
		return nil, err
	}
	var leaves []leaf
	if err := collectLeaves(idx, top, 0, &leaves); err != nil {
		return nil, err
	}
	if len(leaves) == 0 {
		return nil, errors.New("no image manifests")
	}
	descs := make([]ocispec.Descriptor, len(leaves))
	for i := range leaves {
		l := &leaves[i]
		// A Windows image's build is its config's first; an entry for
		// another OS is left unread (its blobs may not be there).
		if l.desc.Platform == nil || strings.EqualFold(l.desc.Platform.OS, "windows") {
			if err := platformFromConfig(l); err != nil {
				return nil, err
			}
		}
		descs[i] = toOCI(l.desc)
	}
	chosen, err := winbuild.BestManifest(host, arch, descs)
	if err != nil {
		return nil, err
	}
	var l leaf
	for _, c := range leaves {
		if c.desc.Digest.String() == chosen.Digest.String() {
			l = c
			break
		}
	}
	img, err := l.parent.Image(l.desc.Digest)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", l.desc.Digest, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("manifest %s: config: %w", l.desc.Digest, err)
	}
	if !strings.EqualFold(cf.OS, "windows") {
		return nil, fmt.Errorf("manifest %s: config is for os %q, not windows", l.desc.Digest, cf.OS)
	}
	if cf.OSVersion == "" && l.desc.Platform != nil && l.desc.Platform.OSVersion != "" {
		cf = cf.DeepCopy()
		cf.OSVersion = l.desc.Platform.OSVersion
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// selectNamed returns the top-level entries named ref, or all if ref is
// empty and they share one name.
func selectNamed(entries []v1.Descriptor, ref string) ([]v1.Descriptor, error) {
	if ref == "" {
		names := make(map[string]bool)
		for _, d := range entries {
			names[refName(d.Annotations)] = true
		}
		if len(names) > 1 {
			list := make([]string, 0, len(names))
			for n := range names {
				if n == "" {
					n = "(unnamed)"
				}
				list = append(list, n)
			}
			sort.Strings(list)
			return nil, fmt.Errorf("holds several images (%s); name the one to use", strings.Join(list, ", "))
		}
		return entries, nil
	}
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	var out []v1.Descriptor
	for _, d := range entries {
		if r.matches(d.Annotations) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no image named %q", ref)
	}
	return out, nil
}

func collectLeaves(parent v1.ImageIndex, descs []v1.Descriptor, depth int, out *[]leaf) error {
	for _, d := range descs {
		switch {
		case d.MediaType.IsImage():
			*out = append(*out, leaf{desc: d, parent: parent})
		case d.MediaType.IsIndex():
			if depth >= maxIndexDepth {
				return fmt.Errorf("index %s: indexes nested too deeply", d.Digest)
			}
			child, err := parent.ImageIndex(d.Digest)
			if err != nil {
				return fmt.Errorf("index %s: %w", d.Digest, err)
			}
			im, err := child.IndexManifest()
			if err != nil {
				return fmt.Errorf("index %s: %w", d.Digest, err)
			}
			if err := collectLeaves(child, im.Manifests, depth+1, out); err != nil {
				return err
			}
		}
		// Anything else (attestations, artifacts) is not an image.
	}
	return nil
}

// platformFromConfig fills in l's platform from its image config.
func platformFromConfig(l *leaf) error {
	img, err := l.parent.Image(l.desc.Digest)
	if err != nil {
		return fmt.Errorf("manifest %s: %w", l.desc.Digest, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("manifest %s: config: %w", l.desc.Digest, err)
	}
	// Keep what the descriptor says but the build.
	l.desc.Platform = withConfig(l.desc.Platform, cf.Platform())
	return nil
}

func toOCI(d v1.Descriptor) ocispec.Descriptor {
	o := ocispec.Descriptor{MediaType: string(d.MediaType), Size: d.Size}
	o.Digest = digestOf(d.Digest)
	if p := d.Platform; p != nil {
		o.Platform = &ocispec.Platform{
			Architecture: p.Architecture,
			OS:           p.OS,
			OSVersion:    p.OSVersion,
			Variant:      p.Variant,
		}
	}
	return o
}
