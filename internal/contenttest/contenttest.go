// Package contenttest writes OCI content into a containerd content store
// for tests: a blob, or a value as JSON (an image config, a manifest, an
// index). It is a test harness (docs/architecture.md, Layering): nothing
// shipped imports it.
package contenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Blob writes b to store and returns its descriptor, of mediaType.
func Blob(t testing.TB, store content.Store, mediaType string, b []byte) ocispec.Descriptor {
	t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := content.WriteBlob(context.Background(), store, desc.Digest.String(), bytes.NewReader(b), desc); err != nil {
		t.Fatalf("write a %s to the content store: %v", mediaType, err)
	}
	return desc
}

// JSON writes v, as JSON, to store and returns its descriptor, of
// mediaType.
func JSON(t testing.TB, store content.Store, mediaType string, v any) ocispec.Descriptor {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode a %s: %v", mediaType, err)
	}
	return Blob(t, store, mediaType, b)
}
