package options

import (
	"errors"
	"testing"

	"github.com/containerd/errdefs"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    Options
		wantErr bool
	}{
		{name: "empty", body: "", want: Options{PauseImage: DefaultPauseImage}},
		{name: "both", body: "pause_image = \"example/pause:1\"\nhost_build = \"10.0.17763\"\n", want: Options{PauseImage: "example/pause:1", HostBuild: "10.0.17763"}},
		{name: "emulation prefix", body: "wine_template_prefix = \"/var/lib/winproc/wine\"\n", want: Options{PauseImage: DefaultPauseImage, WineTemplatePrefix: "/var/lib/winproc/wine"}},
		{name: "misspelt key", body: "pause_imag = \"x\"\n", wantErr: true},
		{name: "wrong type", body: "pause_image = 1\n", wantErr: true},
		// The scratch size comes with each container (the snapshotter's
		// rootfs size label), not from the handler.
		{name: "scratch size", body: "scratch_size_bytes = 1024\n", wantErr: true},
		{name: "not TOML", body: "{", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.body))
			if tc.wantErr {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("Decode: %v, want an InvalidArgument error", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Decode = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
