package winimage

import (
	"fmt"

	"github.com/distribution/reference"
)

// Annotations naming an image in an OCI layout's index.json, as
// containerd's exporter writes them.
const (
	// AnnotationImageName holds the full normalized reference
	// (docker.io/example/pause:1.0); containerd's import prefers it.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName holds the tag ("1.0"), as the OCI image spec
	// suggests.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// imageRef is a parsed image reference.
type imageRef struct {
	full     string // docker.io/example/pause:1.0
	familiar string // example/pause:1.0
	tag      string // 1.0
}

// parseRef parses an image reference the way containerd and Docker do
// (example/pause -> docker.io/example/pause:latest). Digest references
// are rejected: a built image has its own digest.
func parseRef(s string) (imageRef, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return imageRef{}, fmt.Errorf("invalid image reference %q: %w", s, err)
	}
	if _, ok := named.(reference.Digested); ok {
		return imageRef{}, fmt.Errorf("invalid image reference %q: give a name and tag, not a digest", s)
	}
	tagged, ok := reference.TagNameOnly(named).(reference.NamedTagged)
	if !ok {
		return imageRef{}, fmt.Errorf("invalid image reference %q", s)
	}
	return imageRef{
		full:     tagged.String(),
		familiar: reference.FamiliarString(tagged),
		tag:      tagged.Tag(),
	}, nil
}

// annotations returns the index.json annotations naming r.
func (r imageRef) annotations() map[string]string {
	return map[string]string{AnnotationImageName: r.full, AnnotationRefName: r.tag}
}

// matches reports whether the index.json annotations anns name r.
func (r imageRef) matches(anns map[string]string) bool {
	if n := anns[AnnotationImageName]; n != "" {
		return n == r.full
	}
	n := anns[AnnotationRefName]
	return n != "" && (n == r.full || n == r.familiar || n == r.tag)
}

// refName returns the name that index.json annotations give an entry, ""
// if none.
func refName(anns map[string]string) string {
	if n := anns[AnnotationImageName]; n != "" {
		return n
	}
	return anns[AnnotationRefName]
}
