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
		{name: "both", body: "pause_image = \"example/pause:1\"\nscratch_size_bytes = 1024\n", want: Options{PauseImage: "example/pause:1", ScratchSizeBytes: 1024}},
		{name: "emulation prefix", body: "wine_template_prefix = \"/var/lib/winproc/wine\"\n", want: Options{PauseImage: DefaultPauseImage, WineTemplatePrefix: "/var/lib/winproc/wine"}},
		{name: "misspelt key", body: "pause_imag = \"x\"\n", wantErr: true},
		{name: "wrong type", body: "scratch_size_bytes = \"big\"\n", wantErr: true},
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
