// Package winbuild decides whether a Windows container image can run under
// process isolation on a given host, by comparing the image's os.version with
// the host's OS build.
//
// Process-isolated containers share the host kernel, so the image's user mode
// must be ABI-compatible with it. containerd's pull only checks this loosely
// (an image without os.version matches anything, and the first matching
// index entry wins), and HCS then fails late with 0xc0370101 ("The container
// operating system does not match the host operating system"). This package
// lets the snapshotter, the shim, image tooling and the node doctor refuse
// such images early, with a message that says which image would work.
//
// The package is pure: no I/O, no global mutable state. Callers supply the
// host version (e.g. from RtlGetVersion / the registry on Windows).
package winbuild

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// LabelKey is the Kubernetes node label that carries the host's
// major.minor.build (see Version.Label and ParseLabel).
const LabelKey = "node.kubernetes.io/windows-build"

// Version is a Windows OS version as found in an OCI platform's os.version,
// e.g. "10.0.20348.2227". Only Major, Minor and Build matter for
// compatibility; Revision (the monthly patch level) is used to prefer the
// most recently patched image.
type Version struct {
	Major, Minor, Build, Revision uint32
}

// Parse parses "major.minor.build" or "major.minor.build.revision", each part
// a decimal number that fits in 32 bits. Anything else (empty string, signs,
// spaces, extra parts) is rejected with an errdefs.ErrInvalidArgument-class
// error that names the input.
func Parse(s string) (Version, error) {
	return parse(s, 3, 4)
}

// ParseLabel parses the value of the node.kubernetes.io/windows-build label,
// which is exactly "major.minor.build".
func ParseLabel(s string) (Version, error) {
	return parse(s, 3, 3)
}

func parse(s string, minParts, maxParts int) (Version, error) {
	parts := strings.Split(s, ".")
	if len(parts) < minParts || len(parts) > maxParts {
		return Version{}, invalidVersion(s, minParts, maxParts)
	}
	var n [4]uint32
	for i, p := range parts {
		// ParseUint with base 10 accepts only ASCII digits (no sign, no
		// spaces, no underscores), which is the strictness we want.
		u, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return Version{}, invalidVersion(s, minParts, maxParts)
		}
		n[i] = uint32(u)
	}
	return Version{Major: n[0], Minor: n[1], Build: n[2], Revision: n[3]}, nil
}

func invalidVersion(s string, minParts, maxParts int) error {
	want := "major.minor.build[.revision]"
	if minParts == maxParts {
		want = "major.minor.build"
	}
	return &classError{
		msg:   fmt.Sprintf("invalid Windows OS version %q: want %s with decimal numbers, e.g. 10.0.20348", s, want),
		class: []error{errdefs.ErrInvalidArgument},
	}
}

// String returns all four parts, e.g. "10.0.20348.2227" (a missing revision
// parsed as 0 prints as ".0"), so that Parse(v.String()) == v.
func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d.%d", v.Major, v.Minor, v.Build, v.Revision)
}

// Label returns "major.minor.build", the form used by the
// node.kubernetes.io/windows-build label and in error messages (the revision
// does not affect compatibility, so showing it would only confuse).
func (v Version) Label() string {
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Build)
}

// Compare orders versions numerically part by part (so 20348.1000 sorts after
// 20348.999) and returns -1, 0 or +1.
func (v Version) Compare(w Version) int {
	for _, p := range [...][2]uint32{
		{v.Major, w.Major}, {v.Minor, w.Minor}, {v.Build, w.Build}, {v.Revision, w.Revision},
	} {
		switch {
		case p[0] < p[1]:
			return -1
		case p[0] > p[1]:
			return 1
		}
	}
	return 0
}

// describe formats major.minor.build plus the release name when known, e.g.
// "10.0.20348 (ltsc2022)". Release names only exist for 10.0.
func (v Version) describe() string {
	if v.Major == 10 && v.Minor == 0 {
		if r := Release(v.Build); r != "" {
			return v.Label() + " (" + r + ")"
		}
	}
	return v.Label()
}

// classError is an error with a fixed message that classifies as one or more
// sentinel errors (errdefs classes, ErrUnknownBuild) without appending their
// text to the message, so messages stay readable in kubectl events.
type classError struct {
	msg   string
	class []error
}

func (e *classError) Error() string   { return e.msg }
func (e *classError) Unwrap() []error { return e.class }
