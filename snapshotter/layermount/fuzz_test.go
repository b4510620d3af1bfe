package layermount

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
)

// FuzzDecode decodes fuzzed mount lists and encodes fuzzed layers. Decode
// must never panic, must refuse with ErrNotImplemented (a single mount of
// another type) or ErrInvalidArgument (anything else malformed), must keep
// what it accepts consistent with its input, and Decode(l.Mount()) must give
// l back. A mount's options are one string, split at newlines.
func FuzzDecode(f *testing.F) {
	for _, s := range []struct {
		count        uint8 // mounts: 0, 1 or 2 copies
		typ, source  string
		options      string
		target       string
		layerParents string // for the encoding half: Parents, split at newlines
		readOnly     bool
	}{
		// The windows-layer mounts of TestRoundTrip.
		{1, Type, `C:\snapshots\1`, "rw", "", "", false},
		{1, Type, "/var/lib/s/snapshots/3", "rw\n" + `parentLayerPaths=["/var/lib/s/snapshots/2","/var/lib/s/snapshots/1"]`, "", "/var/lib/s/snapshots/2\n/var/lib/s/snapshots/1", false},
		{1, Type, `C:\s\4`, "ro\n" + `parentLayerPaths=["C:\\s\\1"]`, "", `C:\s\1`, true},
		// What containerd's windows snapshotter also sends, and oddities
		// Decode accepts: unknown options, ro then rw, an empty list, null.
		{1, Type, `C:\s\5`, "rw\nfoo=bar\n" + `parentLayerPaths=["C:\\s\\2","C:\\s\\1"]`, "", "", false},
		{1, Type, `C:\s\6`, "ro\nrw\n" + `parentLayerPaths=[]`, "sub", "", false},
		{1, Type, `C:\s\7`, `parentLayerPaths=null`, "", "", true},
		{1, Type, `C:\s\8`, `parentLayerPaths=["a"]` + "\n" + `parentLayerPaths=["b","c"]`, "", "a\n\nb", false},
		// The refusals of TestDecodeRejects.
		{0, Type, "a", "", "", "", false},
		{2, Type, "a", "", "", "", false},
		{1, "overlay", "overlay", "lowerdir=/a:/b", "", "", false},
		{1, Type, "", "rw", "", "", false},
		{1, Type, "a", "rw\nparentLayerPaths=[oops", "", "", false},
		{1, Type, "a", `parentLayerPaths=["x",""]`, "", "", false},
		{1, Type, "a", `parentLayerPaths={"x":1}`, "", "", false},
		{1, Type, "a", `parentLayerPaths="x"`, "", "", false},
	} {
		f.Add(s.count, s.typ, s.source, s.options, s.target, s.layerParents, s.readOnly)
	}
	f.Fuzz(func(t *testing.T, count uint8, typ, source, options, target, layerParents string, readOnly bool) {
		var opts []string
		if options != "" {
			opts = strings.Split(options, "\n")
		}
		m := mount.Mount{Type: typ, Source: source, Target: target, Options: opts}
		mounts := make([]mount.Mount, count%3)
		for i := range mounts {
			mounts[i] = m
		}
		checkDecode(t, mounts)

		// Encoding: any layer with a path and non-empty parents survives
		// Mount and Decode. JSON carries only Unicode, so a parent that is
		// not UTF-8 comes back with U+FFFD in it; the snapshotter makes its
		// paths from numeric ids, so that is left out.
		var parents []string
		if layerParents != "" {
			parents = strings.Split(layerParents, "\n")
		}
		l := Layer{Path: source, ReadOnly: readOnly, Parents: parents}
		if source == "" || slices.Contains(parents, "") {
			return
		}
		for _, p := range parents {
			if !utf8.ValidString(p) {
				return
			}
		}
		got, err := Decode([]mount.Mount{l.Mount()})
		if err != nil {
			t.Fatalf("Decode(%#v.Mount()): %v", l, err)
		}
		if !reflect.DeepEqual(got, l) {
			t.Fatalf("Decode(%#v.Mount()) = %#v", l, got)
		}
	})
}

// checkDecode checks Decode on one fuzzed mount list against what the
// package documentation says of it.
func checkDecode(t *testing.T, mounts []mount.Mount) {
	t.Helper()
	l, err := Decode(mounts)
	if err != nil {
		notImpl := errors.Is(err, errdefs.ErrNotImplemented)
		invalid := errors.Is(err, errdefs.ErrInvalidArgument)
		wantNotImpl := len(mounts) == 1 && mounts[0].Type != Type
		switch {
		case notImpl && invalid:
			t.Fatalf("Decode(%#v): error is of two classes: %v", mounts, err)
		case wantNotImpl && !notImpl:
			t.Fatalf("Decode(%#v) = %v, want ErrNotImplemented for another mount type", mounts, err)
		case !wantNotImpl && !invalid:
			t.Fatalf("Decode(%#v) = %v, want ErrInvalidArgument", mounts, err)
		}
		if !reflect.DeepEqual(l, Layer{}) {
			t.Fatalf("Decode(%#v) returned %#v with its error", mounts, l)
		}
		return
	}

	if len(mounts) != 1 || mounts[0].Type != Type || mounts[0].Source == "" {
		t.Fatalf("Decode(%#v) accepted it as %#v", mounts, l)
	}
	m := mounts[0]
	if l.Path != m.Source {
		t.Fatalf("Decode(%#v): path %q, want the source", m, l.Path)
	}
	// The last of "ro" and "rw" wins; neither is read-write. The last
	// parents option gives the parents.
	readOnly := false
	var parentsOpt string
	for _, o := range m.Options {
		switch {
		case o == "ro":
			readOnly = true
		case o == "rw":
			readOnly = false
		case strings.HasPrefix(o, parentsOption):
			parentsOpt = o[len(parentsOption):]
		}
	}
	if l.ReadOnly != readOnly {
		t.Fatalf("Decode(%#v): ReadOnly %v, want %v", m, l.ReadOnly, readOnly)
	}
	if slices.Contains(l.Parents, "") {
		t.Fatalf("Decode(%#v) accepted an empty parent: %q", m, l.Parents)
	}
	if parentsOpt != "" || len(l.Parents) > 0 {
		var want []string
		if err := json.Unmarshal([]byte(parentsOpt), &want); err != nil {
			t.Fatalf("Decode(%#v) accepted parents %q that do not decode: %v", m, parentsOpt, err)
		}
		if !slices.Equal(l.Parents, want) {
			t.Fatalf("Decode(%#v): parents %q, want %q", m, l.Parents, want)
		}
	}

	// Re-encoding gives the canonical mount, a fixed point of Decode and
	// Mount. The target is not part of the format and is dropped.
	canon := l.Mount()
	again, err := Decode([]mount.Mount{canon})
	if err != nil {
		t.Fatalf("Decode(%#v) = %#v, but its Mount %#v does not decode: %v", m, l, canon, err)
	}
	if again.Path != l.Path || again.ReadOnly != l.ReadOnly || !slices.Equal(again.Parents, l.Parents) {
		t.Fatalf("Decode(%#v) = %#v; Decode of its Mount = %#v", m, l, again)
	}
	if !reflect.DeepEqual(again.Mount(), canon) {
		t.Fatalf("Mount is not a fixed point: %#v then %#v", canon, again.Mount())
	}
}
