//go:build linux

package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winimage"
)

// ociRegistry serves an OCI image layout, read only, over the pull half of
// the distribution API, on 127.0.0.1 (plain HTTP, which containerd uses
// for a loopback registry on a port other than 443): GET and HEAD of
// /v2/, of /v2/<name>/manifests/<tag or digest> and of
// /v2/<name>/blobs/<digest>, with ranges. Every name serves the layout's
// images; a tag is looked up in index.json's ref annotations.
type ociRegistry struct {
	dir   string
	index ocispec.Index
	// Host is the registry's host:port, to put in image references.
	Host string
	// sent counts the blob bytes served.
	sent atomic.Int64
}

func startRegistry(t testing.TB, layout string) *ociRegistry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout, ocispec.ImageIndexFile))
	if err != nil {
		t.Fatal(err)
	}
	r := &ociRegistry{dir: layout}
	if err := json.Unmarshal(b, &r.index); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *ociRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		http.Error(w, "read-only registry", http.StatusMethodNotAllowed)
		return
	}
	p := req.URL.Path
	if p == "/v2/" || p == "/v2" {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		return
	}
	if i := strings.LastIndex(p, "/manifests/"); strings.HasPrefix(p, "/v2/") && i > 0 {
		desc, ok := r.manifest(p[i+len("/manifests/"):])
		if !ok {
			http.Error(w, "manifest unknown", http.StatusNotFound)
			return
		}
		r.serveBlob(w, req, desc.Digest, desc.MediaType, false)
		return
	}
	if i := strings.LastIndex(p, "/blobs/"); strings.HasPrefix(p, "/v2/") && i > 0 {
		d, err := digest.Parse(p[i+len("/blobs/"):])
		if err != nil {
			http.Error(w, "digest invalid", http.StatusBadRequest)
			return
		}
		r.serveBlob(w, req, d, "application/octet-stream", true)
		return
	}
	http.NotFound(w, req)
}

// manifest finds the manifest ref names: a digest, or a tag.
func (r *ociRegistry) manifest(ref string) (ocispec.Descriptor, bool) {
	for _, m := range r.index.Manifests {
		if m.Digest.String() == ref || m.Annotations[winimage.AnnotationRefName] == ref {
			return m, true
		}
	}
	return ocispec.Descriptor{}, false
}

func (r *ociRegistry) serveBlob(w http.ResponseWriter, req *http.Request, d digest.Digest, mediaType string, count bool) {
	if d.Validate() != nil {
		http.Error(w, "digest invalid", http.StatusBadRequest)
		return
	}
	f, err := os.Open(filepath.Join(r.dir, ocispec.ImageBlobsDir, d.Algorithm().String(), d.Encoded()))
	if err != nil {
		http.Error(w, "blob unknown", http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", d.String())
	var cw http.ResponseWriter = w
	if count && req.Method == http.MethodGet {
		cw = &countingWriter{ResponseWriter: w, n: &r.sent}
	}
	http.ServeContent(cw, req, "", time.Time{}, f)
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}
