package contenttest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/plugins/content/local"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestJSONReadsBack(t *testing.T) {
	store, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := ocispec.Image{Platform: ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.1"}}
	desc := JSON(t, store, ocispec.MediaTypeImageConfig, want)
	if desc.MediaType != ocispec.MediaTypeImageConfig || desc.Size == 0 {
		t.Errorf("descriptor %+v", desc)
	}
	b, err := content.ReadBlob(context.Background(), store, desc)
	if err != nil {
		t.Fatal(err)
	}
	var got ocispec.Image
	if err := json.Unmarshal(b, &got); err != nil || got.Platform.OSVersion != want.Platform.OSVersion {
		t.Errorf("read back %+v, %v; want %+v", got.Platform, err, want.Platform)
	}
	// The same content again is no error: the store has it.
	if again := Blob(t, store, ocispec.MediaTypeImageConfig, b); again.Digest != desc.Digest {
		t.Errorf("digest %s, then %s", desc.Digest, again.Digest)
	}
}
