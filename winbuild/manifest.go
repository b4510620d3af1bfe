package winbuild

import (
	"strings"

	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// BestManifest picks, from the entries of an image index, the manifest to run
// under process isolation on host with CPU architecture arch (a GOARCH value
// such as "amd64" or "arm64").
//
// Only entries with os "windows" and the same architecture are considered.
// Among those whose os.version is Compatible with host it prefers, in order:
// the host's exact build, then the highest build, then the highest revision
// (compared numerically); ties keep index order. containerd's own pull takes
// the first matching entry instead, which can be an older build or revision.
//
// Entries without os.version are candidates of last resort: if no entry is
// known to be compatible, the first of them is returned with a nil error. The
// caller should still run Check on the chosen descriptor's os.version, which
// reports ErrUnknownBuild so the caller can decide whether to refuse or warn.
// Entries with an unparsable os.version are never chosen.
//
// If nothing fits, the error classifies as errdefs.ErrNotFound and lists what
// the index offers.
func BestManifest(host Version, arch string, manifests []ocispec.Descriptor) (ocispec.Descriptor, error) {
	arch = normalizeArch(arch)
	var (
		best, unknown         ocispec.Descriptor
		bestV                 Version
		haveBest, haveUnknown bool
	)
	for _, d := range manifests {
		p := d.Platform
		if p == nil || !strings.EqualFold(p.OS, "windows") || normalizeArch(p.Architecture) != arch {
			continue
		}
		if p.OSVersion == "" {
			if !haveUnknown {
				unknown, haveUnknown = d, true
			}
			continue
		}
		v, err := Parse(p.OSVersion)
		if err != nil || !Compatible(host, v) {
			continue
		}
		if !haveBest || better(host, v, bestV) {
			best, bestV, haveBest = d, v, true
		}
	}
	switch {
	case haveBest:
		return best, nil
	case haveUnknown:
		return unknown, nil
	}
	return ocispec.Descriptor{}, &classError{
		msg: "no manifest for windows/" + arch + " that can run on this host under process isolation: " +
			hostNeeds(host) + "; the index offers " + offers(manifests),
		class: []error{errdefs.ErrNotFound},
	}
}

// better reports whether a is preferable to b; both are compatible with host.
func better(host, a, b Version) bool {
	if ea, eb := a.Build == host.Build, b.Build == host.Build; ea != eb {
		return ea
	}
	return a.Compare(b) > 0
}

// normalizeArch maps the architecture spellings seen in the wild to GOARCH
// names, like containerd's platforms.Normalize does for the Windows-relevant
// ones, so "x86_64" in an index still matches an amd64 host.
func normalizeArch(arch string) string {
	arch = strings.ToLower(arch)
	switch arch {
	case "x86_64", "x86-64":
		return "amd64"
	case "aarch64":
		return "arm64"
	}
	return arch
}

// offers describes the index entries for the not-found message, e.g.
// "linux/amd64, windows/amd64 10.0.17763.5329 (ltsc2019)".
func offers(manifests []ocispec.Descriptor) string {
	items := make([]string, 0, len(manifests))
	for _, d := range manifests {
		p := d.Platform
		if p != nil && p.OS == "unknown" {
			continue // buildx attestation manifests ("unknown/unknown"): noise
		}
		if p == nil {
			items = append(items, "a manifest without platform ("+string(d.Digest)+")")
			continue
		}
		s := p.OS + "/" + p.Architecture
		if p.Variant != "" {
			s += "/" + p.Variant
		}
		switch v, err := Parse(p.OSVersion); {
		case p.OSVersion == "" && strings.EqualFold(p.OS, "windows"):
			s += " (no os.version)"
		case p.OSVersion == "":
		case err != nil:
			s += " " + p.OSVersion + " (invalid os.version)"
		default:
			s += " " + p.OSVersion
			if v.Major == 10 && v.Minor == 0 {
				if r := Release(v.Build); r != "" {
					s += " (" + r + ")"
				}
			}
		}
		items = append(items, s)
	}
	if len(items) == 0 {
		return "nothing"
	}
	return strings.Join(items, ", ")
}
