package winbuild

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// v builds a 10.0.build.rev version.
func v(build, rev uint32) Version { return Version{Major: 10, Minor: 0, Build: build, Revision: rev} }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"10.0.20348.2227", v(20348, 2227), true},
		{"10.0.20348", v(20348, 0), true},
		{"10.0.17763.5329", v(17763, 5329), true},
		{"6.3.9600.20000", Version{6, 3, 9600, 20000}, true},
		{"0.0.0", Version{}, true},
		{"4294967295.4294967295.4294967295.4294967295", Version{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, true},
		{"", Version{}, false},
		{"10", Version{}, false},
		{"10.0", Version{}, false},
		{"10.0.20348.1.2", Version{}, false},
		{"10.0.20348.", Version{}, false},
		{".10.0.20348", Version{}, false},
		{"10..20348", Version{}, false},
		{"10.0.x", Version{}, false},
		{"10.0.20348a", Version{}, false},
		{" 10.0.20348", Version{}, false},
		{"10.0.20348 ", Version{}, false},
		{"+10.0.20348", Version{}, false},
		{"10.-0.20348", Version{}, false},
		{"10.0.0x4f7c", Version{}, false},
		{"10.0.20_348", Version{}, false},
		{"4294967296.0.0", Version{}, false},
		{"ltsc2022", Version{}, false},
		{"10.0.20348.2227\n", Version{}, false},
	} {
		got, err := Parse(tc.in)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v, nil", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("Parse(%q) = %+v, nil; want error", tc.in, got)
			continue
		}
		if !errdefs.IsInvalidArgument(err) {
			t.Errorf("Parse(%q) error %v is not InvalidArgument", tc.in, err)
		}
		if want := "invalid Windows OS version " + `"` + strings.ReplaceAll(tc.in, "\n", `\n`) + `"`; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Parse(%q) error %q does not start with %q", tc.in, err, want)
		}
	}
}

func TestParseLabel(t *testing.T) {
	if got, err := ParseLabel("10.0.20348"); err != nil || got != v(20348, 0) {
		t.Errorf("ParseLabel(10.0.20348) = %v, %v", got, err)
	}
	for _, bad := range []string{"10.0.20348.2227", "10.0", "", "windows"} {
		if _, err := ParseLabel(bad); err == nil || !errdefs.IsInvalidArgument(err) ||
			!strings.Contains(err.Error(), `want major.minor.build with`) {
			t.Errorf("ParseLabel(%q) error = %v; want InvalidArgument naming the label form", bad, err)
		}
	}
	if got := v(20348, 2227).Label(); got != "10.0.20348" {
		t.Errorf("Label() = %q", got)
	}
}

func TestVersionStringCompare(t *testing.T) {
	if got := v(20348, 2227).String(); got != "10.0.20348.2227" {
		t.Errorf("String() = %q", got)
	}
	if got := v(20348, 0).String(); got != "10.0.20348.0" {
		t.Errorf("String() = %q", got)
	}
	for _, tc := range []struct {
		a, b Version
		want int
	}{
		{v(20348, 1000), v(20348, 999), 1}, // numeric, not lexical
		{v(20348, 999), v(20348, 1000), -1},
		{v(20348, 5), v(20348, 5), 0},
		{v(26100, 0), v(20348, 9999), 1},
		{Version{6, 3, 9600, 0}, v(14393, 0), -1},
		{Version{10, 1, 0, 0}, v(26100, 0), 1},
	} {
		if got := tc.a.Compare(tc.b); got != tc.want {
			t.Errorf("%v.Compare(%v) = %d; want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestRelease(t *testing.T) {
	for build, want := range map[uint32]string{
		17763: "ltsc2019",
		18362: "1903",
		18363: "1909",
		19041: "2004",
		19042: "20H2",
		20348: "ltsc2022",
		22000: "Windows 11 21H2",
		22621: "Windows 11 22H2",
		22631: "Windows 11 23H2",
		25398: "23H2",
		26100: "ltsc2025",
		27000: "",
		0:     "",
	} {
		if got := Release(build); got != want {
			t.Errorf("Release(%d) = %q; want %q", build, got, want)
		}
	}
}

func TestCompatible(t *testing.T) {
	for _, tc := range []struct {
		name        string
		host, image Version
		want        bool
	}{
		{"1809 same build other revision", v(17763, 5329), v(17763, 1), true},
		{"1809 same build same revision", v(17763, 5329), v(17763, 5329), true},
		{"1809 host ltsc2022 image", v(17763, 5329), v(20348, 2227), false},
		{"1903 host 1909 image", v(18362, 0), v(18363, 0), false},
		{"1909 host 1903 image", v(18363, 0), v(18362, 0), false},
		{"ltsc2022 host ltsc2019 image", v(20348, 2227), v(17763, 5329), false},
		{"ltsc2022 host ltsc2022 image", v(20348, 2227), v(20348, 1), true},
		{"ltsc2022 host ltsc2025 image", v(20348, 2227), v(26100, 1), false},
		{"ltsc2025 host ltsc2025 image", v(26100, 2033), v(26100, 1), true},
		{"ltsc2025 host ltsc2022 image", v(26100, 2033), v(20348, 2227), true},
		{"ltsc2025 host ltsc2019 image", v(26100, 2033), v(17763, 5329), false},
		{"ltsc2025 host 23H2 image", v(26100, 2033), v(25398, 1), false},
		{"win11 21H2 ltsc2022 image", v(22000, 1), v(20348, 2227), true},
		{"win11 21H2 ltsc2025 image", v(22000, 1), v(26100, 1), false},
		{"win11 21H2 ltsc2019 image", v(22000, 1), v(17763, 1), false},
		{"win11 22H2 ltsc2022 image", v(22621, 1), v(20348, 2227), true},
		{"win11 22H2 ltsc2025 image", v(22621, 1), v(26100, 1), false},
		{"win11 22H2 ltsc2019 image", v(22621, 1), v(17763, 1), false},
		{"win11 22H2 win11 21H2 image", v(22621, 1), v(22000, 1), false},
		{"win11 23H2 ltsc2022 image", v(22631, 1), v(20348, 1), true},
		{"23H2 host 23H2 image", v(25398, 1), v(25398, 9), true},
		{"23H2 host ltsc2022 image", v(25398, 1), v(20348, 1), true},
		{"23H2 host ltsc2025 image", v(25398, 1), v(26100, 1), false},
		{"23H2 host ltsc2019 image", v(25398, 1), v(17763, 1), false},
		{"23H2 host win11 22H2 image", v(25398, 1), v(22621, 1), false},
		{"future host ltsc2022 image", v(27000, 0), v(20348, 1), true},
		{"future host ltsc2025 image", v(27000, 0), v(26100, 1), true},
		{"future host own image", v(27000, 0), v(27000, 1), true},
		{"future host 23H2 image", v(27000, 0), v(25398, 1), false},
		{"future host newer image", v(27000, 0), v(27001, 0), false},
		{"major/minor mismatch 6.3 image", v(20348, 1), Version{6, 3, 20348, 1}, false},
		{"major/minor mismatch 6.3 image on old host", v(17763, 1), Version{6, 3, 17763, 1}, false},
		{"minor mismatch", v(26100, 1), Version{10, 1, 20348, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Compatible(tc.host, tc.image); got != tc.want {
				t.Errorf("Compatible(host %v, image %v) = %v; want %v", tc.host, tc.image, got, tc.want)
			}
		})
	}
}

func TestCompatibleBuilds(t *testing.T) {
	for _, tc := range []struct {
		host uint32
		want []uint32
	}{
		{17763, []uint32{17763}},
		{19042, []uint32{19042}},
		{20348, []uint32{20348}},
		{22000, []uint32{22000, 20348}},
		{22621, []uint32{22621, 20348}},
		{25398, []uint32{25398, 20348}},
		{26100, []uint32{26100, 20348}},
		{27000, []uint32{27000, 26100, 20348}},
	} {
		if got := CompatibleBuilds(v(tc.host, 7)); !slices.Equal(got, tc.want) {
			t.Errorf("CompatibleBuilds(%d) = %v; want %v", tc.host, got, tc.want)
		}
	}
}

// CompatibleBuilds feeds the error messages and tooling; it must describe
// exactly what Compatible accepts.
func TestCompatibleBuildsAgreesWithCompatible(t *testing.T) {
	builds := []uint32{14393, 17763, 18362, 18363, 19041, 20347, 20348, 20349, 22000, 22621, 22631, 25398, 26099, 26100, 26101, 27000}
	for _, h := range builds {
		host := v(h, 100)
		list := CompatibleBuilds(host)
		for _, b := range builds {
			if got, want := Compatible(host, v(b, 3)), slices.Contains(list, b); got != want {
				t.Errorf("host %d image %d: Compatible = %v, CompatibleBuilds %v contains = %v", h, b, got, list, want)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	const ref = "example/app:1.0"
	type kind int
	const (
		ok kind = iota
		mismatch
		unknown
		invalid
	)
	for _, tc := range []struct {
		name  string
		host  Version
		image string
		want  kind
		msg   string // exact message, when set
	}{
		{name: "1809 any revision", host: v(17763, 5329), image: "10.0.17763.1", want: ok},
		{name: "1809 no revision", host: v(17763, 5329), image: "10.0.17763", want: ok},
		{
			name: "issue example", host: v(20348, 2227), image: "10.0.17763.5329", want: mismatch,
			msg: `image "example/app:1.0" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`,
		},
		{
			name: "1809 host ltsc2022 image", host: v(17763, 5329), image: "10.0.20348.2227", want: mismatch,
			msg: `image "example/app:1.0" is built for 10.0.20348 (ltsc2022); this host is 10.0.17763 (ltsc2019); process isolation needs an image for 10.0.17763 (ltsc2019)`,
		},
		{name: "ltsc2022 host ltsc2022 image", host: v(20348, 2227), image: "10.0.20348.1", want: ok},
		{
			name: "ltsc2022 host ltsc2025 image", host: v(20348, 2227), image: "10.0.26100.1", want: mismatch,
			msg: `image "example/app:1.0" is built for 10.0.26100 (ltsc2025); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`,
		},
		{name: "ltsc2025 host ltsc2022 image", host: v(26100, 1), image: "10.0.20348.2227", want: ok},
		{name: "ltsc2025 host ltsc2025 image", host: v(26100, 1), image: "10.0.26100.2033", want: ok},
		{
			name: "ltsc2025 host ltsc2019 image", host: v(26100, 1), image: "10.0.17763.5329", want: mismatch,
			msg: `image "example/app:1.0" is built for 10.0.17763 (ltsc2019); this host is 10.0.26100 (ltsc2025); process isolation needs an image for 10.0.26100 (ltsc2025) or 10.0.20348 (ltsc2022)`,
		},
		{name: "win11 22H2 ltsc2022", host: v(22621, 1), image: "10.0.20348.2227", want: ok},
		{
			name: "win11 22H2 ltsc2025", host: v(22621, 1), image: "10.0.26100.1", want: mismatch,
			msg: `image "example/app:1.0" is built for 10.0.26100 (ltsc2025); this host is 10.0.22621 (Windows 11 22H2); process isolation needs an image for 10.0.22621 (Windows 11 22H2) or 10.0.20348 (ltsc2022)`,
		},
		{name: "23H2 host ltsc2022", host: v(25398, 1), image: "10.0.20348.1", want: ok},
		{name: "23H2 host ltsc2025", host: v(25398, 1), image: "10.0.26100.1", want: mismatch},
		{
			name: "future host, three choices", host: v(27000, 0), image: "10.0.17763.1", want: mismatch,
			msg: `image "example/app:1.0" is built for 10.0.17763 (ltsc2019); this host is 10.0.27000; process isolation needs an image for 10.0.27000, 10.0.26100 (ltsc2025) or 10.0.20348 (ltsc2022)`,
		},
		{
			name: "major/minor mismatch", host: v(20348, 1), image: "6.3.9600.20000", want: mismatch,
			msg: `image "example/app:1.0" is built for 6.3.9600; this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`,
		},
		{
			name: "empty os.version", host: v(20348, 1), image: "", want: unknown,
			msg: `image "example/app:1.0" does not declare an os.version, so its Windows build is unknown; this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`,
		},
		{
			name: "garbage os.version", host: v(20348, 1), image: "ltsc2022", want: invalid,
			msg: `image "example/app:1.0": invalid Windows OS version "ltsc2022": want major.minor.build[.revision] with decimal numbers, e.g. 10.0.20348`,
		},
		{name: "truncated os.version", host: v(20348, 1), image: "10.0", want: invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(ref, tc.host, tc.image)
			var me *MismatchError
			isMismatch := errors.As(err, &me)
			got := ok
			switch {
			case err == nil:
			case isMismatch:
				got = mismatch
				if !errdefs.IsFailedPrecondition(err) {
					t.Errorf("mismatch error is not FailedPrecondition")
				}
				if errors.Is(err, ErrUnknownBuild) {
					t.Errorf("mismatch error matches ErrUnknownBuild")
				}
				if me.Ref != ref || me.Host != tc.host || me.Image.Label() != strings.Join(strings.Split(tc.image, ".")[:3], ".") {
					t.Errorf("MismatchError fields = %+v", *me)
				}
			case errors.Is(err, ErrUnknownBuild):
				got = unknown
				if !errdefs.IsFailedPrecondition(err) {
					t.Errorf("unknown-build error is not FailedPrecondition")
				}
			case errdefs.IsInvalidArgument(err):
				got = invalid
			default:
				t.Fatalf("unclassified error %v", err)
			}
			if got != tc.want {
				t.Fatalf("Check(%v, %q) = %v (kind %d); want kind %d", tc.host, tc.image, err, got, tc.want)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("message:\n got %s\nwant %s", err, tc.msg)
			}
		})
	}
}

func TestCheckEmptyRef(t *testing.T) {
	err := Check("", v(20348, 1), "10.0.17763.1")
	want := `image is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`
	if err == nil || err.Error() != want {
		t.Errorf("Check with empty ref = %v; want %s", err, want)
	}
}

// The shim and snapshotter return these errors over gRPC/ttrpc; the code and
// the message must survive containerd's mapping.
func TestGRPCMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{Check("a", v(20348, 1), "10.0.17763.1"), codes.FailedPrecondition},
		{Check("a", v(20348, 1), ""), codes.FailedPrecondition},
		{Check("a", v(20348, 1), "x"), codes.InvalidArgument},
		{func() error { _, err := BestManifest(v(20348, 1), "amd64", nil); return err }(), codes.NotFound},
	} {
		st, _ := status.FromError(errgrpc.ToGRPC(tc.err))
		if st.Code() != tc.code || st.Message() != tc.err.Error() {
			t.Errorf("ToGRPC(%v) = %v %q; want %v with the same message", tc.err, st.Code(), st.Message(), tc.code)
		}
	}
}

func desc(name, os, arch, osVersion string) ocispec.Descriptor {
	return ocispec.Descriptor{
		MediaType: ocispec.MediaTypeImageManifest,
		Digest:    "sha256:" + digest.Digest(name),
		Platform:  &ocispec.Platform{OS: os, Architecture: arch, OSVersion: osVersion},
	}
}

// bestManifestCase is a host, its architecture and an index, and the
// manifest BestManifest picks or the NotFound it answers.
type bestManifestCase struct {
	name      string
	host      Version
	arch      string
	manifests []ocispec.Descriptor
	want      string // digest suffix; "" means NotFound
	msg       string // exact NotFound message, when set
}

// sampleIndex is a realistic multi-arch, multi-build index, deliberately
// ordered so that "first match wins" would pick a worse entry.
var sampleIndex = []ocispec.Descriptor{
	desc("linux-amd64", "linux", "amd64", ""),
	desc("linux-arm64", "linux", "arm64", ""),
	desc("attestation", "unknown", "unknown", ""),
	desc("ltsc2019", "windows", "amd64", "10.0.17763.5329"),
	desc("ltsc2022-old", "windows", "amd64", "10.0.20348.999"),
	desc("ltsc2022-new", "windows", "amd64", "10.0.20348.1000"),
	desc("ltsc2022-mid", "windows", "amd64", "10.0.20348.1000"), // tie: first wins
	desc("23h2", "windows", "amd64", "10.0.25398.500"),
	desc("ltsc2025", "windows", "amd64", "10.0.26100.2033"),
	desc("ltsc2025-arm64", "windows", "arm64", "10.0.26100.9999"),
	desc("garbage", "windows", "amd64", "10.0.99999.x"),
}

// bestManifestCases are TestBestManifest's table.
var bestManifestCases = []bestManifestCase{
	{name: "ltsc2019 host", host: v(17763, 1), arch: "amd64", manifests: sampleIndex, want: "ltsc2019"},
	{name: "ltsc2022 host: highest revision, numerically", host: v(20348, 1), arch: "amd64", manifests: sampleIndex, want: "ltsc2022-new"},
	{name: "23H2 host: exact build", host: v(25398, 1), arch: "amd64", manifests: sampleIndex, want: "23h2"},
	{name: "ltsc2025 host: exact build", host: v(26100, 1), arch: "amd64", manifests: sampleIndex, want: "ltsc2025"},
	{name: "ltsc2025 arm64 host", host: v(26100, 1), arch: "arm64", manifests: sampleIndex, want: "ltsc2025-arm64"},
	{name: "win11 22H2 host: ltsc2022", host: v(22621, 1), arch: "amd64", manifests: sampleIndex, want: "ltsc2022-new"},
	{name: "future host: highest LTSC", host: v(27000, 1), arch: "amd64", manifests: sampleIndex, want: "ltsc2025"},
	{name: "x86_64 spelling", host: v(26100, 1), arch: "x86_64", manifests: sampleIndex, want: "ltsc2025"},
	{
		name: "ltsc2025 host without exact: ltsc2022 over 23H2",
		host: v(26100, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{
			desc("23h2", "windows", "amd64", "10.0.25398.500"),
			desc("ltsc2022", "windows", "amd64", "10.0.20348.1"),
		},
		want: "ltsc2022",
	},
	{
		name: "exact build preferred over higher revision of other LTSC",
		host: v(26100, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{
			desc("ltsc2022", "windows", "amd64", "10.0.20348.99999"),
			desc("ltsc2025", "windows", "amd64", "10.0.26100.1"),
		},
		want: "ltsc2025",
	},
	{
		name: "index spells the architecture x86_64",
		host: v(20348, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{
			desc("arm64", "windows", "arm64", "10.0.20348.5"),
			desc("x86_64", "Windows", "x86_64", "10.0.20348.1"),
		},
		want: "x86_64",
	},
	{
		name: "revision 999 vs 1000 in reverse order",
		host: v(20348, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{
			desc("r1000", "windows", "amd64", "10.0.20348.1000"),
			desc("r999", "windows", "amd64", "10.0.20348.999"),
		},
		want: "r1000",
	},
	{
		name: "missing os.version is last resort",
		host: v(20348, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{
			desc("noversion", "windows", "amd64", ""),
			desc("ltsc2022", "windows", "amd64", "10.0.20348.1"),
		},
		want: "ltsc2022",
	},
	{
		name: "missing os.version chosen when nothing known fits",
		host: v(20348, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{
			desc("ltsc2019", "windows", "amd64", "10.0.17763.1"),
			desc("noversion", "windows", "amd64", ""),
			desc("noversion2", "windows", "amd64", ""),
		},
		want: "noversion",
	},
	{
		name: "nil platform skipped",
		host: v(20348, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{
			{Digest: "sha256:noplatform"},
			desc("ltsc2022", "windows", "amd64", "10.0.20348.1"),
		},
		want: "ltsc2022",
	},
	{
		name: "ltsc2022 host, only older and newer builds",
		host: v(20348, 2227), arch: "amd64",
		manifests: []ocispec.Descriptor{
			desc("linux-amd64", "linux", "amd64", ""),
			desc("attestation", "unknown", "unknown", ""),
			desc("ltsc2019", "windows", "amd64", "10.0.17763.5329"),
			desc("ltsc2025", "windows", "amd64", "10.0.26100.2033"),
			desc("ltsc2022-arm64", "windows", "arm64", "10.0.20348.2227"),
			desc("garbage", "windows", "amd64", "10.0.x"),
			{Digest: "sha256:noplatform"},
		},
		msg: `no manifest for windows/amd64 that can run on this host under process isolation: this host is 10.0.20348 (ltsc2022); ` +
			`process isolation needs an image for 10.0.20348 (ltsc2022); the index offers linux/amd64, ` +
			`windows/amd64 10.0.17763.5329 (ltsc2019), windows/amd64 10.0.26100.2033 (ltsc2025), ` +
			`windows/arm64 10.0.20348.2227 (ltsc2022), windows/amd64 10.0.x (invalid os.version), ` +
			`a manifest without platform (sha256:noplatform)`,
	},
	{
		name: "win11 host, ltsc2025 only",
		host: v(22000, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{desc("ltsc2025", "windows", "amd64", "10.0.26100.1")},
		msg: `no manifest for windows/amd64 that can run on this host under process isolation: this host is 10.0.22000 (Windows 11 21H2); ` +
			`process isolation needs an image for 10.0.22000 (Windows 11 21H2) or 10.0.20348 (ltsc2022); the index offers windows/amd64 10.0.26100.1 (ltsc2025)`,
	},
	{
		name: "linux-only index",
		host: v(26100, 1), arch: "amd64",
		manifests: []ocispec.Descriptor{desc("linux-amd64", "linux", "amd64", ""), desc("linux-arm64", "linux", "arm64", "")},
		msg: `no manifest for windows/amd64 that can run on this host under process isolation: this host is 10.0.26100 (ltsc2025); ` +
			`process isolation needs an image for 10.0.26100 (ltsc2025) or 10.0.20348 (ltsc2022); the index offers linux/amd64, linux/arm64`,
	},
	{
		name: "empty index", host: v(20348, 1), arch: "amd64",
		msg: `no manifest for windows/amd64 that can run on this host under process isolation: this host is 10.0.20348 (ltsc2022); ` +
			`process isolation needs an image for 10.0.20348 (ltsc2022); the index offers nothing`,
	},
	{name: "arm64 host, ltsc2022", host: v(20348, 1), arch: "arm64", manifests: sampleIndex},
}

func TestBestManifest(t *testing.T) {
	for _, tc := range bestManifestCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BestManifest(tc.host, tc.arch, tc.manifests)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("BestManifest = %v; want NotFound", got.Digest)
				}
				if !errdefs.IsNotFound(err) {
					t.Errorf("error %v is not NotFound", err)
				}
				if tc.msg != "" && err.Error() != tc.msg {
					t.Errorf("message:\n got %s\nwant %s", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("BestManifest: %v", err)
			}
			if want := "sha256:" + tc.want; string(got.Digest) != want {
				t.Errorf("BestManifest = %s (%s); want %s", got.Digest, got.Platform.OSVersion, want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"10.0.20348.2227", "10.0.17763", "", "6.3.9600.1", "1.2.3.4.5", "10.0.x", "4294967296.0.0", "00010.0.01.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s)
		if err != nil {
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "Windows OS version") {
				t.Fatalf("Parse(%q): unclassified error %v", s, err)
			}
			return
		}
		// Valid input round-trips through String and Label.
		back, err := Parse(got.String())
		if err != nil || back != got {
			t.Fatalf("Parse(%q) = %+v; Parse(String()=%q) = %+v, %v", s, got, got.String(), back, err)
		}
		lbl, err := ParseLabel(got.Label())
		if err != nil || lbl != (Version{got.Major, got.Minor, got.Build, 0}) {
			t.Fatalf("ParseLabel(%q) = %+v, %v", got.Label(), lbl, err)
		}
		// Anything Parse accepts must be usable by the other entry points.
		// An image always runs on a host of its own build.
		if err := Check("fuzz", got, s); err != nil {
			t.Fatalf("Check(host %v, image %q) = %v; want nil", got, s, err)
		}
		if got.Compare(got) != 0 {
			t.Fatalf("Compare not reflexive for %v", got)
		}
	})
}

func TestImageOSVersion(t *testing.T) {
	tests := []struct {
		name, config, entry, want string
	}{
		{"config alone", "10.0.20348.1", "", "10.0.20348.1"},
		{"index entry alone", "", "10.0.17763.5820", "10.0.17763.5820"},
		{"both: the config's", "10.0.17763.1", "10.0.20348.1", "10.0.17763.1"},
		{"neither", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ImageOSVersion(tc.config, tc.entry); got != tc.want {
				t.Errorf("ImageOSVersion(%q, %q) = %q; want %q", tc.config, tc.entry, got, tc.want)
			}
		})
	}
}
