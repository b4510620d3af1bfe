package winimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	digest "github.com/opencontainers/go-digest"
)

// Format is an output format.
type Format string

const (
	// FormatOCILayout is an OCI image layout directory: oci-layout,
	// index.json and blobs/sha256/. It can be a base for LoadBase;
	// `ctr images import` takes it as a tar (see FormatOCIArchive).
	FormatOCILayout Format = "oci-layout"
	// FormatOCIArchive is an OCI image layout in a tar file, what
	// `ctr images export` writes and `ctr images import` reads.
	FormatOCIArchive Format = "oci-archive"
	// FormatDockerArchive is a docker-archive tar (manifest.json, the
	// config and the layers), what `docker save` used to write; `docker
	// load` and `ctr images import` read it. It holds single images only.
	FormatDockerArchive Format = "docker-archive"
)

// Formats lists the output formats.
func Formats() []Format {
	return []Format{FormatDockerArchive, FormatOCIArchive, FormatOCILayout}
}

// ParseFormat returns the Format named s.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, 0, 3)
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return "", fmt.Errorf("unknown format %q: want %s", s, strings.Join(names, ", "))
}

// Artifact is what can be written: a v1.Image or a v1.ImageIndex.
type Artifact interface {
	MediaType() (types.MediaType, error)
	Digest() (v1.Hash, error)
	RawManifest() ([]byte, error)
}

// archiveTime is the time of the entries of the tars written here.
var archiveTime = time.Unix(0, 0).UTC()

// Write writes a (a v1.Image or v1.ImageIndex) named ref to path in format.
// ref is an image reference such as "example/pause:1.0" (normalized as
// containerd does: docker.io/example/pause:1.0); it may be empty for the
// OCI formats (an unnamed image) but not for a docker-archive.
//
// Archives are written to a temporary file next to path and renamed into
// place, replacing an existing file. A layout directory must not exist or be
// empty; on error, what was written into it is removed.
func Write(ctx context.Context, path string, format Format, ref string, a Artifact) error {
	switch format {
	case FormatOCILayout:
		return WriteOCILayout(ctx, path, ref, a)
	case FormatOCIArchive, FormatDockerArchive:
	default:
		_, err := ParseFormat(string(format))
		return err
	}
	// Check what can be checked before creating the file.
	if format == FormatDockerArchive {
		if err := checkDockerArchive(ref, a); err != nil {
			return err
		}
	} else if ref != "" {
		if _, err := parseRef(ref); err != nil {
			return err
		}
	}
	return writeFileAtomic(path, func(w io.Writer) error {
		if format == FormatDockerArchive {
			return WriteDockerArchive(ctx, w, ref, a)
		}
		return WriteOCIArchive(ctx, w, ref, a)
	})
}

func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func checkDockerArchive(ref string, a Artifact) error {
	if _, ok := a.(v1.Image); !ok {
		return errors.New("a docker-archive holds single images, not an index: use oci-archive or oci-layout")
	}
	if ref == "" {
		return errors.New("a docker-archive needs an image reference (e.g. example/pause:1.0)")
	}
	_, err := parseRef(ref)
	return err
}

// WriteDockerArchive writes img named ref as a docker-archive tar to w
// (with go-containerregistry's tarball writer: manifest.json with Config,
// RepoTags and Layers, the config and the compressed layers).
func WriteDockerArchive(ctx context.Context, w io.Writer, ref string, a Artifact) error {
	if err := checkDockerArchive(ref, a); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r, _ := parseRef(ref)
	// RepoTags in the familiar form, as docker save writes them.
	tag, err := name.NewTag(r.familiar)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := tarball.Write(tag, a.(v1.Image), w); err != nil {
		return fmt.Errorf("docker-archive: %w", err)
	}
	return nil
}

// WriteOCIArchive writes a as an OCI image layout tar to w: oci-layout,
// index.json (one entry for a, named ref unless ref is empty), and the
// blobs. Entries are in a fixed order with fixed times, so the same image
// gives the same tar. Every blob is checked against its digest.
func WriteOCIArchive(ctx context.Context, w io.Writer, ref string, a Artifact) error {
	blobs, indexJSON, err := prepareLayout(ref, a)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	put := func(name string, typ byte, size int64, data func(io.Writer) error) error {
		hdr := &tar.Header{
			Format:   tar.FormatPAX,
			Name:     name,
			Typeflag: typ,
			Mode:     0o644,
			Size:     size,
			ModTime:  archiveTime,
		}
		if typ == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if data == nil {
			return nil
		}
		return data(tw)
	}
	small := func(b []byte) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(b); return err }
	}
	if err := put(ocispecLayoutFile, tar.TypeReg, int64(len(layoutFileContent)), small(layoutFileContent)); err != nil {
		return err
	}
	if err := put(indexFile, tar.TypeReg, int64(len(indexJSON)), small(indexJSON)); err != nil {
		return err
	}
	if err := put("blobs/", tar.TypeDir, 0, nil); err != nil {
		return err
	}
	if err := put("blobs/sha256/", tar.TypeDir, 0, nil); err != nil {
		return err
	}
	for _, b := range blobs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := put(b.path(), tar.TypeReg, b.size, b.writeTo); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteOCILayout writes a as an OCI image layout directory dir, which must
// not exist or be empty (see Write).
func WriteOCILayout(ctx context.Context, dir, ref string, a Artifact) (err error) {
	blobs, indexJSON, err := prepareLayout(ref, a)
	if err != nil {
		return err
	}
	created := false
	switch ents, err := os.ReadDir(dir); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		created = true
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%s: not empty (an OCI layout is written into a new or empty directory)", dir)
	}
	defer func() {
		if err == nil {
			return
		}
		if created {
			os.RemoveAll(dir)
			return
		}
		for _, n := range []string{indexFile, ocispecLayoutFile, "blobs"} {
			os.RemoveAll(filepath.Join(dir, n))
		}
	}()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return err
	}
	for _, b := range blobs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, filepath.FromSlash(b.path())), b.writeTo); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ocispecLayoutFile), layoutFileContent, 0o644); err != nil {
		return err
	}
	// index.json last: a layout without it is obviously incomplete.
	return os.WriteFile(filepath.Join(dir, indexFile), indexJSON, 0o644)
}

func writeFile(path string, data func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = data(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

const (
	ocispecLayoutFile = "oci-layout"
	indexFile         = "index.json"
)

var layoutFileContent = []byte(`{"imageLayoutVersion":"1.0.0"}`)

// blob is one blob of a layout.
type blob struct {
	digest v1.Hash
	size   int64
	what   string                        // for messages
	data   []byte                        // manifests and configs
	open   func() (io.ReadCloser, error) // layers
	hint   string                        // added to open errors
}

func (b *blob) path() string { return "blobs/" + b.digest.Algorithm + "/" + b.digest.Hex }

// writeTo writes the blob to w, checking its size and digest.
func (b *blob) writeTo(w io.Writer) error {
	var rc io.ReadCloser
	if b.data != nil {
		rc = io.NopCloser(bytes.NewReader(b.data))
	} else {
		var err error
		if rc, err = b.open(); err != nil {
			return fmt.Errorf("%s %s: %w%s", b.what, b.digest, err, b.hint)
		}
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(w, io.TeeReader(io.LimitReader(rc, b.size), h))
	if err != nil {
		return fmt.Errorf("%s %s: %w", b.what, b.digest, err)
	}
	if n != b.size {
		return fmt.Errorf("%s %s: %d bytes, the descriptor says %d", b.what, b.digest, n, b.size)
	}
	if extra, _ := rc.Read(make([]byte, 1)); extra > 0 {
		return fmt.Errorf("%s %s: larger than the %d bytes the descriptor says", b.what, b.digest, b.size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != b.digest.Hex {
		return fmt.Errorf("%s %s: content has digest sha256:%s", b.what, b.digest, got)
	}
	return nil
}

// prepareLayout collects the blobs of a (sorted by digest, without
// duplicates) and returns them with the index.json naming it ref.
func prepareLayout(ref string, a Artifact) ([]*blob, []byte, error) {
	var anns map[string]string
	if ref != "" {
		r, err := parseRef(ref)
		if err != nil {
			return nil, nil, err
		}
		anns = r.annotations()
	}
	set := make(map[v1.Hash]*blob)
	desc, err := collect(a, set, 0)
	if err != nil {
		return nil, nil, err
	}
	desc.Annotations = anns
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests:     []v1.Descriptor{desc},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return nil, nil, err
	}
	blobs := make([]*blob, 0, len(set))
	for _, b := range set {
		blobs = append(blobs, b)
	}
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].digest.String() < blobs[j].digest.String() })
	return blobs, indexJSON, nil
}

func addBlob(set map[v1.Hash]*blob, b *blob) {
	if _, ok := set[b.digest]; !ok {
		set[b.digest] = b
	}
}

// rawBlob returns a blob holding data, whose digest must be want (if set).
func rawBlob(what string, data []byte, want v1.Hash) (*blob, error) {
	d, size, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if want != (v1.Hash{}) && d != want {
		return nil, fmt.Errorf("%s: content has digest %s, not %s", what, d, want)
	}
	return &blob{digest: d, size: size, what: what, data: data}, nil
}

// collect adds the blobs of a to set and returns a's descriptor; an image's
// carries its platform.
func collect(a Artifact, set map[v1.Hash]*blob, depth int) (v1.Descriptor, error) {
	mt, err := a.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	raw, err := a.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	want, err := a.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mb, err := rawBlob("manifest", raw, want)
	if err != nil {
		return v1.Descriptor{}, err
	}
	desc := v1.Descriptor{MediaType: mt, Digest: mb.digest, Size: mb.size}
	switch a := a.(type) {
	case v1.Image:
		if !mt.IsImage() {
			return v1.Descriptor{}, fmt.Errorf("image %s has media type %q", mb.digest, mt)
		}
		p, err := collectImage(a, mb.digest, set)
		if err != nil {
			return v1.Descriptor{}, err
		}
		desc.Platform = p
	case v1.ImageIndex:
		if !mt.IsIndex() {
			return v1.Descriptor{}, fmt.Errorf("index %s has media type %q", mb.digest, mt)
		}
		if depth >= maxIndexDepth {
			return v1.Descriptor{}, fmt.Errorf("index %s: indexes nested too deeply", mb.digest)
		}
		im, err := a.IndexManifest()
		if err != nil {
			return v1.Descriptor{}, err
		}
		for _, d := range im.Manifests {
			var child Artifact
			switch {
			case d.MediaType.IsImage():
				child, err = a.Image(d.Digest)
			case d.MediaType.IsIndex():
				child, err = a.ImageIndex(d.Digest)
			default:
				err = fmt.Errorf("unsupported media type %q", d.MediaType)
			}
			if err != nil {
				return v1.Descriptor{}, fmt.Errorf("index %s: manifest %s: %w", mb.digest, d.Digest, err)
			}
			cd, err := collect(child, set, depth+1)
			if err != nil {
				return v1.Descriptor{}, err
			}
			if cd.Digest != d.Digest || cd.Size != d.Size {
				return v1.Descriptor{}, fmt.Errorf("index %s: manifest %s: content is %s (%d bytes)", mb.digest, d.Digest, cd.Digest, cd.Size)
			}
		}
	default:
		return v1.Descriptor{}, fmt.Errorf("cannot write a %T", a)
	}
	addBlob(set, mb)
	return desc, nil
}

// collectImage adds the config and layers of img to set and returns its
// platform.
func collectImage(img v1.Image, dgst v1.Hash, set map[v1.Hash]*blob) (*v1.Platform, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", dgst, err)
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", dgst, err)
	}
	cb, err := rawBlob("config", rawCfg, m.Config.Digest)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", dgst, err)
	}
	addBlob(set, cb)
	var cf v1.ConfigFile
	if err := json.Unmarshal(rawCfg, &cf); err != nil {
		return nil, fmt.Errorf("image %s: config: %w", dgst, err)
	}
	for _, ld := range m.Layers {
		l, err := img.LayerByDigest(ld.Digest)
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %s: %w", dgst, ld.Digest, err)
		}
		if ld.Digest.Algorithm != "sha256" {
			return nil, fmt.Errorf("image %s: layer %s: only sha256 digests are supported", dgst, ld.Digest)
		}
		b := &blob{digest: ld.Digest, size: ld.Size, what: "layer", open: l.Compressed}
		if !ld.MediaType.IsDistributable() {
			b.hint = " (a non-distributable layer: copy the base image including such layers)"
		}
		addBlob(set, b)
	}
	return cf.Platform(), nil
}

func digestOf(h v1.Hash) digest.Digest { return digest.Digest(h.String()) }
