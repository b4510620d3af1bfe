package layermount

import (
	"errors"
	"reflect"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		layer Layer
		want  mount.Mount
	}{
		{
			name:  "base layer being written",
			layer: Layer{Path: `C:\snapshots\1`},
			want:  mount.Mount{Type: "windows-layer", Source: `C:\snapshots\1`, Options: []string{"rw"}},
		},
		{
			name:  "scratch over two layers",
			layer: Layer{Path: "/var/lib/s/snapshots/3", Parents: []string{"/var/lib/s/snapshots/2", "/var/lib/s/snapshots/1"}},
			want: mount.Mount{Type: "windows-layer", Source: "/var/lib/s/snapshots/3", Options: []string{
				"rw", `parentLayerPaths=["/var/lib/s/snapshots/2","/var/lib/s/snapshots/1"]`,
			}},
		},
		{
			name:  "view",
			layer: Layer{Path: `C:\s\4`, ReadOnly: true, Parents: []string{`C:\s\1`}},
			want:  mount.Mount{Type: "windows-layer", Source: `C:\s\4`, Options: []string{"ro", `parentLayerPaths=["C:\\s\\1"]`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.layer.Mount()
			if !reflect.DeepEqual(m, tc.want) {
				t.Fatalf("Mount() = %#v, want %#v", m, tc.want)
			}
			got, err := Decode([]mount.Mount{m})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.layer) {
				t.Fatalf("Decode = %#v, want %#v", got, tc.layer)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name   string
		mounts []mount.Mount
		is     error
	}{
		{name: "no mount", mounts: nil, is: errdefs.ErrInvalidArgument},
		{name: "two mounts", mounts: []mount.Mount{{Type: Type, Source: "a"}, {Type: Type, Source: "b"}}, is: errdefs.ErrInvalidArgument},
		{name: "overlay", mounts: []mount.Mount{{Type: "overlay", Source: "overlay"}}, is: errdefs.ErrNotImplemented},
		{name: "no source", mounts: []mount.Mount{{Type: Type}}, is: errdefs.ErrInvalidArgument},
		{name: "bad JSON", mounts: []mount.Mount{{Type: Type, Source: "a", Options: []string{"rw", "parentLayerPaths=[oops"}}}, is: errdefs.ErrInvalidArgument},
		{name: "empty parent", mounts: []mount.Mount{{Type: Type, Source: "a", Options: []string{`parentLayerPaths=["x",""]`}}}, is: errdefs.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.mounts)
			if err == nil {
				t.Fatal("Decode succeeded")
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
		})
	}
}
