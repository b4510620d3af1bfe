package winbuild

import (
	"errors"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// Build numbers referenced by the compatibility rules.
const (
	ltsc2019 = 17763 // Windows Server 2019, 1809
	ltsc2022 = 20348 // Windows Server 2022
	ltsc2025 = 26100 // Windows Server 2025 (also Windows 11 24H2)
)

// Release returns the common name of a Windows 10.0 build, e.g. "ltsc2022",
// "1903" or "Windows 11 22H2", or "" if the build is not known to this
// package. Server images are named by their tag, client-only builds by their
// Windows 11 release name.
func Release(build uint32) string {
	// A switch rather than a map: a constant table with no mutable state.
	switch build {
	case 14393:
		return "ltsc2016"
	case 16299:
		return "1709"
	case 17134:
		return "1803"
	case ltsc2019:
		return "ltsc2019"
	case 18362:
		return "1903"
	case 18363:
		return "1909"
	case 19041:
		return "2004"
	case 19042:
		return "20H2"
	case ltsc2022:
		return "ltsc2022"
	case 22000:
		return "Windows 11 21H2"
	case 22621:
		return "Windows 11 22H2"
	case 22631:
		return "Windows 11 23H2"
	case 25398:
		return "23H2"
	case ltsc2025:
		return "ltsc2025"
	}
	return ""
}

// stableABI reports whether build is an LTSC release covered by Windows'
// stable-ABI promise: its images run under process isolation on every later
// host (from that build on). ltsc2019 and earlier are not covered.
//
// When Microsoft ships the next LTSC, add it here; until then a host of that
// build still runs its own images (exact match) but later hosts refuse them,
// which is the safe direction.
func stableABI(build uint32) bool {
	return build == ltsc2022 || build == ltsc2025
}

// Compatible reports whether an image built for image can run under process
// isolation on host, following Microsoft's published matrix:
//
//   - major and minor must match;
//   - a host before 10.0.20348 runs only images of exactly its build (any
//     revision);
//   - a host at or after 20348 runs images of exactly its build, plus images
//     of any stable-ABI LTSC (ltsc2022, ltsc2025) not newer than the host.
//     So 20348 runs ltsc2022; 22000/22621/22631 (Windows 11) run ltsc2022;
//     25398 (23H2) runs 25398 and ltsc2022; 26100 runs ltsc2025 and
//     ltsc2022.
//
// Hosts newer than the last known LTSC (e.g. a hypothetical 10.0.27000) run
// their own build plus every known LTSC from ltsc2022 on. containerd's
// platform matcher agrees on the floor (20348) while hcsshim's
// CheckHostAndContainerCompat floors at the latest LTSC (26100) and would
// refuse ltsc2022; we follow Microsoft's statement that newer hosts keep
// running ltsc2022 images rather than hcsshim's stricter floor.
//
// Unlike containerd's matcher, non-LTSC builds between the floor and the
// host (e.g. 25398 images on a 26100 host, 22000 images on a 22621 host) are
// refused: Microsoft does not list them as supported.
func Compatible(host, image Version) bool {
	if host.Major != image.Major || host.Minor != image.Minor {
		return false
	}
	if image.Build == host.Build {
		return true
	}
	// Stable-ABI images start at 20348, so hosts before 20348 only ever get
	// the exact-build match above.
	return stableABI(image.Build) && image.Build <= host.Build
}

// CompatibleBuilds lists the image builds host can run under process
// isolation, most preferred first: the host's own build, then stable-ABI
// LTSCs newest first. Every image with the host's major.minor and one of these
// builds is Compatible.
func CompatibleBuilds(host Version) []uint32 {
	builds := []uint32{host.Build}
	if host.Build < ltsc2022 {
		return builds
	}
	for _, b := range [...]uint32{ltsc2025, ltsc2022} {
		if b < host.Build {
			builds = append(builds, b)
		}
	}
	return builds
}

// ErrUnknownBuild classifies Check's error for an image that declares no
// os.version. Such images are common (older build tooling) and might work,
// but nothing can be promised, so the caller decides: refuse, or log a
// warning and continue. The error also classifies as
// errdefs.ErrFailedPrecondition for callers that just propagate it.
var ErrUnknownBuild = errors.New("image does not declare its Windows OS build")

// MismatchError reports an image whose OS build cannot run under process
// isolation on this host. It classifies as errdefs.ErrFailedPrecondition, so
// containerd's gRPC error mapping turns it into codes.FailedPrecondition with
// the message intact.
type MismatchError struct {
	Ref   string  // image reference as the user wrote it; may be empty
	Host  Version // host OS version
	Image Version // image os.version
}

// Error returns, e.g.:
//
//	image "example/app:1.0" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)
func (e *MismatchError) Error() string {
	return imagePhrase(e.Ref) + " is built for " + e.Image.describe() + "; " + hostNeeds(e.Host)
}

// Unwrap makes errdefs.IsFailedPrecondition and errors.Is work.
func (e *MismatchError) Unwrap() error { return errdefs.ErrFailedPrecondition }

// Check decides whether the image ref, whose config declares
// imageOSVersion (the OCI platform's os.version), can run under process
// isolation on host. It returns:
//
//   - nil if it can;
//   - a *MismatchError if the declared build cannot run here;
//   - an error matching ErrUnknownBuild (and ErrFailedPrecondition) if
//     imageOSVersion is empty — the caller may choose to only warn;
//   - an errdefs.ErrInvalidArgument-class error if imageOSVersion is not a
//     version at all (a broken image, never waved through).
//
// ref is only used in messages.
func Check(ref string, host Version, imageOSVersion string) error {
	if imageOSVersion == "" {
		return &classError{
			msg: imagePhrase(ref) + " does not declare an os.version, so its Windows build is unknown; " +
				hostNeeds(host),
			class: []error{ErrUnknownBuild, errdefs.ErrFailedPrecondition},
		}
	}
	image, err := Parse(imageOSVersion)
	if err != nil {
		return &classError{
			msg:   imagePhrase(ref) + ": " + err.Error(),
			class: []error{errdefs.ErrInvalidArgument},
		}
	}
	if !Compatible(host, image) {
		return &MismatchError{Ref: ref, Host: host, Image: image}
	}
	return nil
}

func imagePhrase(ref string) string {
	if ref == "" {
		return "image"
	}
	return "image " + strconv.Quote(ref)
}

// hostNeeds is the shared tail of the messages:
// "this host is X; process isolation needs an image for A, B or C".
func hostNeeds(host Version) string {
	return "this host is " + host.describe() + "; process isolation needs an image for " + needs(host)
}

func needs(host Version) string {
	builds := CompatibleBuilds(host)
	names := make([]string, len(builds))
	for i, b := range builds {
		names[i] = Version{Major: host.Major, Minor: host.Minor, Build: b}.describe()
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
