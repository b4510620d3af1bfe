// Package layermount owns the windows-layer contract between the
// snapshotter, the differ and the shim: the one mount a windowsfilter
// snapshot is handed out as,
//
//	{Type: "windows-layer", Source: <snapshot dir>, Options: ["rw"|"ro", "parentLayerPaths=<JSON array, nearest parent first>"]}
//
// and the names inside the directories it names (names.go): a layer's
// Files, Hives and UtilityVM, a scratch's sandbox.vhdx on Windows and its
// upper and work directories in the Linux emulation, and where a
// snapshotter root keeps its snapshots.
//
// This is the format of containerd's built-in windows snapshotter, which
// runhcs and our shim both consume. containerd's own helpers for it exist only
// on Windows; this package is the same format for every platform, so the
// snapshotter, the differ and the shim agree on it and test it on Linux.
package layermount

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
)

const (
	// Type is the mount type of a windowsfilter snapshot.
	Type = "windows-layer"
	// parentsOption prefixes the JSON list of parent layer directories.
	parentsOption = "parentLayerPaths="
)

// Layer is a decoded windows-layer mount.
type Layer struct {
	// Path is the snapshot's own directory: the scratch of an active
	// snapshot, or the view's directory.
	Path string
	// ReadOnly is set for views.
	ReadOnly bool
	// Parents are the image layer directories, nearest parent first; the
	// last one is the base layer.
	Parents []string
}

// Mount encodes l as the windows-layer mount.
func (l Layer) Mount() mount.Mount {
	mode := "rw"
	if l.ReadOnly {
		mode = "ro"
	}
	options := []string{mode}
	if len(l.Parents) > 0 {
		// Marshalling a []string cannot fail.
		parents, _ := json.Marshal(l.Parents)
		options = append(options, parentsOption+string(parents))
	}
	return mount.Mount{Type: Type, Source: l.Path, Options: options}
}

// Decode reads the single windows-layer mount of mounts. A mount of another
// type is ErrNotImplemented, as containerd's windows differ answers, so a
// chain of differs can try the next one; any other malformed input is
// ErrInvalidArgument.
func Decode(mounts []mount.Mount) (Layer, error) {
	if len(mounts) != 1 {
		return Layer{}, fmt.Errorf("a Windows layer is exactly one %s mount, got %d mounts: %w", Type, len(mounts), errdefs.ErrInvalidArgument)
	}
	m := mounts[0]
	if m.Type != Type {
		return Layer{}, fmt.Errorf("mount type %q is not a Windows layer (%s): %w", m.Type, Type, errdefs.ErrNotImplemented)
	}
	if m.Source == "" {
		return Layer{}, fmt.Errorf("%s mount has no source: %w", Type, errdefs.ErrInvalidArgument)
	}
	l := Layer{Path: m.Source}
	for _, o := range m.Options {
		switch {
		case o == "ro":
			l.ReadOnly = true
		case o == "rw":
			l.ReadOnly = false
		case strings.HasPrefix(o, parentsOption):
			if err := json.Unmarshal([]byte(o[len(parentsOption):]), &l.Parents); err != nil {
				return Layer{}, fmt.Errorf("%s mount of %s: option %q is not a JSON list of paths: %v: %w", Type, m.Source, o, err, errdefs.ErrInvalidArgument)
			}
		}
	}
	for _, p := range l.Parents {
		if p == "" {
			return Layer{}, fmt.Errorf("%s mount of %s lists an empty parent layer path: %w", Type, m.Source, errdefs.ErrInvalidArgument)
		}
	}
	return l, nil
}
