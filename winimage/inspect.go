package winimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winbuild"
)

// maxMetadataSize bounds the manifests, configs and index files read.
const maxMetadataSize = 16 << 20

// Inspection describes the images of an OCI layout directory, an OCI layout
// tar or a docker-archive tar.
type Inspection struct {
	Format Format
	// Entries are the top-level entries: index.json's manifests, or
	// manifest.json's images.
	Entries []*Entry
}

// Entry is an index or an image manifest.
type Entry struct {
	// Names are the references naming a top-level entry (index.json
	// annotations, or RepoTags of a docker-archive).
	Names []string
	// Descriptor is the entry's descriptor (with the platform its parent
	// index declares). Images of a docker-archive have no manifest: their
	// descriptor is that of the config file, with an empty media type.
	Descriptor v1.Descriptor
	// Manifests are the entries of an index.
	Manifests []*Entry
	// Config and Layers describe an image.
	Config       *v1.ConfigFile
	ConfigDigest v1.Hash
	Layers       []Layer
	// Problems are inconsistencies found, e.g. a missing blob or an index
	// platform that disagrees with the config.
	Problems []string
}

// Layer is a layer of an inspected image.
type Layer struct {
	Descriptor v1.Descriptor // for a docker-archive: the file's digest and size
	DiffID     v1.Hash       // from the config, if it lists as many as there are layers
	File       string        // the file in a docker-archive
	Missing    bool          // the blob is not there (e.g. a non-distributable layer)
}

// IsIndex reports whether e is an index.
func (e *Entry) IsIndex() bool { return e.Config == nil && e.Descriptor.MediaType.IsIndex() }

// Platform returns e's platform: its descriptor's, completed from its
// config, with the Windows build winbuild.ImageOSVersion gives; nil if
// neither says.
func (e *Entry) Platform() *v1.Platform {
	p := e.Descriptor.Platform
	if e.Config == nil {
		return p
	}
	return withConfig(p, e.Config.Platform())
}

// withConfig is an image's platform from its index entry's (entry) and its
// config's (config): the entry's, or the config's when the entry has none,
// with the build the image was made for (winbuild.ImageOSVersion).
func withConfig(entry, config *v1.Platform) *v1.Platform {
	if entry == nil {
		return config
	}
	if config == nil {
		return entry
	}
	q := *entry
	q.OSVersion = winbuild.ImageOSVersion(config.OSVersion, entry.OSVersion)
	return &q
}

// Images returns e if it is an image, else the images under it.
func (e *Entry) Images() []*Entry {
	if e.Config != nil {
		return []*Entry{e}
	}
	var out []*Entry
	for _, c := range e.Manifests {
		out = append(out, c.Images()...)
	}
	return out
}

// Best returns the image under e that winbuild.BestManifest picks for host
// and arch (see SelectImage).
func (e *Entry) Best(host winbuild.Version, arch string) (*Entry, error) {
	if arch == "" {
		arch = DefaultArchitecture
	}
	imgs := e.Images()
	descs := make([]ocispec.Descriptor, len(imgs))
	for i, img := range imgs {
		d := img.Descriptor
		d.Platform = img.Platform()
		descs[i] = toOCI(d)
	}
	chosen, err := winbuild.BestManifest(host, arch, descs)
	if err != nil {
		return nil, err
	}
	for _, img := range imgs {
		if digestOf(img.Descriptor.Digest) == chosen.Digest {
			return img, nil
		}
	}
	return nil, errors.New("no image chosen") // not reached
}

// source reads the files of a layout or archive.
type source interface {
	// read returns the content of a (small) file.
	read(name string) ([]byte, error)
	// stat returns the size of a file.
	stat(name string) (int64, error)
}

// Inspect describes the OCI layout directory, OCI layout tar or
// docker-archive tar at p. Inconsistencies inside the images are reported
// as Problems; an error means p is not something Inspect understands.
func Inspect(p string) (*Inspection, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		src := dirSource(p)
		if _, err := src.stat(ocispecLayoutFile); err != nil {
			return nil, fmt.Errorf("%s: not an OCI image layout (no oci-layout file)", p)
		}
		return inspectOCI(FormatOCILayout, src)
	}
	src, err := readTar(p)
	if err != nil {
		return nil, err
	}
	if _, ok := src.files[ocispecLayoutFile]; ok {
		return inspectOCI(FormatOCIArchive, src)
	}
	if _, ok := src.files["manifest.json"]; ok {
		return inspectDocker(src)
	}
	return nil, fmt.Errorf("%s: neither an OCI layout tar (no oci-layout) nor a docker-archive (no manifest.json)", p)
}

type dirSource string

func (d dirSource) path(name string) string {
	return filepath.Join(string(d), filepath.FromSlash(name))
}

func (d dirSource) read(name string) ([]byte, error) {
	f, err := os.Open(d.path(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetadataSize+1))
	if err == nil && len(b) > maxMetadataSize {
		err = fmt.Errorf("%s: larger than %d bytes", name, maxMetadataSize)
	}
	return b, err
}

func (d dirSource) stat(name string) (int64, error) {
	fi, err := os.Stat(d.path(name))
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", name)
	}
	return fi.Size(), nil
}

// tarSource is a tar read once: every file's size and sha256, and the
// content of the small ones.
type tarSource struct {
	files map[string]*tarFile
}

type tarFile struct {
	size   int64
	sha256 string
	data   []byte // nil if larger than maxMetadataSize
}

func readTar(p string) (*tarSource, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src := &tarSource{files: make(map[string]*tarFile)}
	symlinks := make(map[string]string)
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable tar: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeSymlink {
			// docker save (v1.2) links duplicate layers.
			symlinks[path.Clean(hdr.Name)] = path.Join(path.Dir(hdr.Name), hdr.Linkname)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		tf := &tarFile{size: hdr.Size}
		h := sha256.New()
		var w io.Writer = h
		var buf bytes.Buffer
		if hdr.Size <= maxMetadataSize {
			w = io.MultiWriter(h, &buf)
		}
		if _, err := io.Copy(w, tr); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p, hdr.Name, err)
		}
		tf.sha256 = hex.EncodeToString(h.Sum(nil))
		if hdr.Size <= maxMetadataSize {
			tf.data = buf.Bytes()
		}
		src.files[path.Clean(hdr.Name)] = tf
	}
	for name, target := range symlinks {
		if tf, ok := src.files[target]; ok {
			if _, exists := src.files[name]; !exists {
				src.files[name] = tf
			}
		}
	}
	return src, nil
}

func (t *tarSource) read(name string) ([]byte, error) {
	f, ok := t.files[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	if f.data == nil {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxMetadataSize)
	}
	return f.data, nil
}

func (t *tarSource) stat(name string) (int64, error) {
	f, ok := t.files[name]
	if !ok {
		return 0, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return f.size, nil
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// readBlob reads a metadata blob and checks its digest.
func readBlob(src source, d v1.Descriptor) ([]byte, error) {
	if d.Digest.Algorithm == "" || strings.ContainsAny(d.Digest.Hex, "/\\.") {
		return nil, fmt.Errorf("invalid digest %q", d.Digest)
	}
	b, err := src.read(blobPath(d.Digest))
	if err != nil {
		return nil, err
	}
	if d.Digest.Algorithm == "sha256" {
		if got, _, _ := v1.SHA256(bytes.NewReader(b)); got != d.Digest {
			return nil, fmt.Errorf("blob %s has digest %s", d.Digest, got)
		}
	}
	if d.Size != 0 && int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s is %d bytes, the descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b, nil
}

func inspectOCI(format Format, src source) (*Inspection, error) {
	raw, err := src.read(indexFile)
	if err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	ins := &Inspection{Format: format}
	for _, d := range im.Manifests {
		e := inspectDescriptor(src, d, 0)
		if n := refName(d.Annotations); n != "" {
			e.Names = []string{n}
		}
		ins.Entries = append(ins.Entries, e)
	}
	return ins, nil
}

func (e *Entry) problem(format string, args ...any) {
	e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
}

func inspectDescriptor(src source, d v1.Descriptor, depth int) *Entry {
	e := &Entry{Descriptor: d}
	switch {
	case d.MediaType.IsIndex():
		if depth >= maxIndexDepth {
			e.problem("indexes nested too deeply")
			return e
		}
		raw, err := readBlob(src, d)
		if err != nil {
			e.problem("index: %v", err)
			return e
		}
		im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			e.problem("index: %v", err)
			return e
		}
		for _, c := range im.Manifests {
			ce := inspectDescriptor(src, c, depth+1)
			if ce.Config != nil && c.Platform == nil {
				ce.problem("the index entry has no platform")
			}
			e.Manifests = append(e.Manifests, ce)
		}
	case d.MediaType.IsImage():
		raw, err := readBlob(src, d)
		if err != nil {
			e.problem("manifest: %v", err)
			return e
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			e.problem("manifest: %v", err)
			return e
		}
		inspectImage(e, src, m)
	default:
		e.problem("not an image or index (media type %q)", d.MediaType)
	}
	return e
}

func inspectImage(e *Entry, src source, m *v1.Manifest) {
	e.ConfigDigest = m.Config.Digest
	e.Config = &v1.ConfigFile{}
	if raw, err := readBlob(src, m.Config); err != nil {
		e.problem("config: %v", err)
	} else if err := json.Unmarshal(raw, e.Config); err != nil {
		e.problem("config: %v", err)
	}
	for _, ld := range m.Layers {
		l := Layer{Descriptor: ld}
		size, err := src.stat(blobPath(ld.Digest))
		switch {
		case err != nil && !ld.MediaType.IsDistributable():
			l.Missing = true
		case err != nil:
			l.Missing = true
			e.problem("layer %s: missing", ld.Digest)
		case size != ld.Size:
			e.problem("layer %s: %d bytes, the manifest says %d", ld.Digest, size, ld.Size)
		}
		if ts, ok := src.(*tarSource); ok && err == nil && ld.Digest.Algorithm == "sha256" {
			if got := ts.files[blobPath(ld.Digest)].sha256; got != ld.Digest.Hex {
				e.problem("layer %s: content has digest sha256:%s", ld.Digest, got)
			}
		}
		e.Layers = append(e.Layers, l)
	}
	checkImage(e)
}

// checkImage adds the problems of an image's config, and its diffIDs.
func checkImage(e *Entry) {
	cf := e.Config
	if len(cf.RootFS.DiffIDs) == len(e.Layers) {
		for i := range e.Layers {
			e.Layers[i].DiffID = cf.RootFS.DiffIDs[i]
		}
	} else if cf.OS != "" {
		e.problem("the config lists %d diff_ids for %d layers", len(cf.RootFS.DiffIDs), len(e.Layers))
	}
	if cf.OS == "" {
		return // the config could not be read; already reported
	}
	if !strings.EqualFold(cf.OS, "windows") {
		e.problem("not a Windows image (os %q)", cf.OS)
		return
	}
	if cf.OSVersion == "" {
		e.problem("the config declares no os.version")
	} else if _, err := winbuild.Parse(cf.OSVersion); err != nil {
		e.problem("config: %v", err)
	}
	if p := e.Descriptor.Platform; p != nil {
		if !strings.EqualFold(p.OS, cf.OS) || p.Architecture != cf.Architecture {
			e.problem("the index says %s/%s, the config %s/%s", p.OS, p.Architecture, cf.OS, cf.Architecture)
		}
		switch {
		case p.OSVersion == "" && strings.EqualFold(p.OS, "windows"):
			e.problem("the index entry has no os.version (containerd and winbuild match on it)")
		case p.OSVersion != "" && cf.OSVersion != "" && p.OSVersion != cf.OSVersion:
			e.problem("the index says os.version %s, the config %s", p.OSVersion, cf.OSVersion)
		}
	}
}

// dockerManifest is an entry of a docker-archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func inspectDocker(src *tarSource) (*Inspection, error) {
	raw, err := src.read("manifest.json")
	if err != nil {
		return nil, err
	}
	var ms []dockerManifest
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	ins := &Inspection{Format: FormatDockerArchive}
	for _, m := range ms {
		e := &Entry{Names: m.RepoTags, Config: &v1.ConfigFile{}}
		ins.Entries = append(ins.Entries, e)
		if f, ok := src.files[path.Clean(m.Config)]; ok {
			e.ConfigDigest = v1.Hash{Algorithm: "sha256", Hex: f.sha256}
			e.Descriptor = v1.Descriptor{Digest: e.ConfigDigest, Size: f.size}
		}
		if b, err := src.read(path.Clean(m.Config)); err != nil {
			e.problem("config: %v", err)
		} else if err := json.Unmarshal(b, e.Config); err != nil {
			e.problem("config %s: %v", m.Config, err)
		}
		for _, name := range m.Layers {
			l := Layer{File: name}
			if f, ok := src.files[path.Clean(name)]; ok {
				l.Descriptor = v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: f.sha256}, Size: f.size}
			} else {
				l.Missing = true
				e.problem("layer %s: missing", name)
			}
			e.Layers = append(e.Layers, l)
		}
		checkImage(e)
	}
	return ins, nil
}
