package layertar

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/pkg/archive/compression"
)

// DefaultMaxEntrySize is the default limit on the declared size of one entry.
const DefaultMaxEntrySize int64 = 64 << 30

const (
	readBufferSize = 32 << 10 // buffered tar input (headers); larger data reads bypass it
	copyBufferSize = 1 << 20  // file data copies
	dirCacheSize   = 64       // open directory handles kept by Import
)

// Buffers are pooled: small layers (and the fuzzer) would otherwise spend
// their time allocating and collecting them.
var (
	copyBufPool = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}
	readerPool  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}
)

// ImportOption configures Import.
type ImportOption func(*importConfig)

type importConfig struct {
	maxEntrySize int64
	// sidecarOnly stores all metadata, whiteouts and opaque markers in the
	// sidecar, as on platforms without xattrs (used by tests).
	sidecarOnly bool
}

// WithMaxEntrySize sets the largest declared entry size Import accepts
// (default DefaultMaxEntrySize). n <= 0 keeps the default.
func WithMaxEntrySize(n int64) ImportOption {
	return func(c *importConfig) {
		if n > 0 {
			c.maxEntrySize = n
		}
	}
}

// Import unpacks the uncompressed Windows layer tar r into the layer
// directory dir (created if needed; it should be empty), and returns the
// number of file data bytes written. See the package documentation for the
// on-disk representation and the checks made. Import checks ctx between
// entries and while copying data.
//
// On error, partial content is left inside dir only, and the caller should
// discard dir. The returned size then counts the data written before the
// failure.
func Import(ctx context.Context, r io.Reader, dir string, opts ...ImportOption) (int64, error) {
	cfg := importConfig{maxEntrySize: DefaultMaxEntrySize}
	for _, o := range opts {
		o(&cfg)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("layertar: import: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("layertar: import: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("layertar: import: %w", err)
	}
	im := &importer{
		ctx:   ctx,
		cfg:   cfg,
		root:  root,
		top:   &dirHandle{root: root},
		cache: make(map[string]*dirHandle),
		times: make(map[string]int),
	}
	err = im.run(r)
	if cerr := im.close(); err == nil && cerr != nil {
		err = fmt.Errorf("layertar: import: %w", cerr)
	}
	return im.written, err
}

// ImportCompressed is Import for a tar that may be gzip or zstd compressed
// (detected from its first bytes). It reads the stream to its end, so that
// the decompressor verifies its checksum.
func ImportCompressed(ctx context.Context, r io.Reader, dir string, opts ...ImportOption) (int64, error) {
	dr, err := compression.DecompressStream(r)
	if err != nil {
		return 0, fmt.Errorf("layertar: import: detecting compression: %w", err)
	}
	defer dr.Close()
	n, err := Import(ctx, dr, dir, opts...)
	if err != nil {
		return n, err
	}
	if _, err := io.Copy(io.Discard, dr); err != nil {
		return n, fmt.Errorf("layertar: import: %w: %w", ErrCorruptArchive, err)
	}
	return n, nil
}

// dirHandle is an open directory of the layer, known to be a real
// directory (no symlink on its path).
type dirHandle struct {
	rel  string
	root *os.Root
	f    *os.File // opened on demand, for fd based calls
	used uint64
}

func (h *dirHandle) file() (*os.File, error) {
	if h.f == nil {
		f, err := h.root.Open(".")
		if err != nil {
			return nil, err
		}
		h.f = f
	}
	return h.f, nil
}

func (h *dirHandle) close() {
	if h.f != nil {
		h.f.Close()
	}
	h.root.Close()
}

type importer struct {
	ctx     context.Context
	cfg     importConfig
	root    *os.Root
	top     *dirHandle // the layer directory
	cache   map[string]*dirHandle
	tick    uint64
	buf     *[]byte // from copyBufPool, taken on first use
	written int64
	side    sidecar
	// Directory times, applied once all entries are written.
	times    map[string]int
	dirTimes []dirTime
	// entryTime is the mtime of the entry being imported; directories it
	// creates implicitly get it, so that imports are reproducible.
	entryTime time.Time
}

type dirTime struct {
	rel          string
	atime, mtime time.Time
}

func (im *importer) close() error {
	if im.buf != nil {
		copyBufPool.Put(im.buf)
		im.buf = nil
	}
	for _, h := range im.cache {
		h.close()
	}
	if im.top.f != nil {
		im.top.f.Close()
	}
	return im.root.Close()
}

// countingReader counts the bytes archive/tar consumed.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (im *importer) run(r io.Reader) error {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()
	cr := &countingReader{r: br}
	tr := tar.NewReader(cr)
	last := ""
	// entryEnd is the offset where the last entry's data ends. archive/tar
	// reports io.EOF both after the end-of-archive zero blocks and when the
	// stream just stops at an entry boundary (or in its padding); only the
	// first is complete. An empty stream is an empty layer.
	var entryEnd int64
	for {
		if err := im.ctx.Err(); err != nil {
			return fmt.Errorf("layertar: import: %w", err)
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			if d := cr.n - entryEnd; cr.n > 0 && (d < 512 || d%512 != 0) {
				return fmt.Errorf("layertar: import: after entry %q: %w: no end-of-archive marker", last, ErrCorruptArchive)
			}
			break
		}
		// archive/tar returns ErrInsecurePath with a valid header under
		// GODEBUG=tarinsecurepath=0; our own checks are stricter.
		if err != nil && !(errors.Is(err, tar.ErrInsecurePath) && hdr != nil) {
			if last == "" {
				return fmt.Errorf("layertar: import: %w: %w", ErrCorruptArchive, err)
			}
			return fmt.Errorf("layertar: import: after entry %q: %w: %w", last, ErrCorruptArchive, err)
		}
		last = hdr.Name
		entryEnd = cr.n
		if !headerOnly(hdr.Typeflag) && hdr.Size > 0 {
			entryEnd += (hdr.Size + 511) &^ 511
		}
		im.entryTime = hdr.ModTime
		if err := im.entry(tr, hdr); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, tar.ErrHeader) {
				err = fmt.Errorf("%w: %w", ErrCorruptArchive, err)
			}
			return &EntryError{Name: hdr.Name, Err: err}
		}
	}
	// Files/ always exists, so that it can be used as an overlay lowerdir.
	if _, err := im.dir(filesDir); err != nil {
		return fmt.Errorf("layertar: import: %w", err)
	}
	return im.finish()
}

func (im *importer) finish() error {
	for i := len(im.dirTimes) - 1; i >= 0; i-- {
		dt := im.dirTimes[i]
		if err := im.root.Chtimes(filepath.FromSlash(dt.rel), dt.atime, dt.mtime); err != nil {
			return fmt.Errorf("layertar: import: %w", err)
		}
	}
	if err := im.side.write(im.root); err != nil {
		return fmt.Errorf("layertar: import: writing %s: %w", sidecarName, err)
	}
	return nil
}

// headerOnly reports the types whose size archive/tar ignores.
func headerOnly(typ byte) bool {
	switch typ {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		return true
	}
	return false
}

func (im *importer) entry(tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if hdr.Typeflag == tar.TypeGNUSparse {
		return errorf(ErrUnsupported, "sparse file")
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return errorf(ErrUnsupported, "sparse file")
		}
	}
	if hdr.Size > im.cfg.maxEntrySize {
		return errorf(ErrEntryTooLarge, "declared size %d exceeds the limit of %d bytes", hdr.Size, im.cfg.maxEntrySize)
	}
	p, skip, err := parseEntryName(hdr.Name)
	if err != nil {
		return err
	}
	if skip || p.top == utilityVMDir {
		return nil
	}
	if strings.HasPrefix(p.base, whiteoutPrefix) {
		return im.whiteout(p)
	}
	if p.parent == "" && hdr.Typeflag != tar.TypeDir {
		return errorf(ErrInvalidEntry, "%s must be a directory", p.rel)
	}
	if p.adsBase != "" && hdr.Typeflag != tar.TypeReg {
		return errorf(ErrInvalidEntry, "alternate data stream entries must be regular files")
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return im.directory(p, hdr)
	case tar.TypeReg:
		return im.regular(tr, p, hdr)
	case tar.TypeSymlink:
		return im.symlink(p, hdr)
	case tar.TypeLink:
		return im.hardlink(p, hdr)
	default:
		return errorf(ErrUnsupported, "entry type %q", hdr.Typeflag)
	}
}

// entryTimes returns the atime and mtime to set for hdr.
func entryTimes(hdr *tar.Header) (time.Time, time.Time) {
	if hdr.AccessTime.IsZero() {
		return hdr.ModTime, hdr.ModTime
	}
	return hdr.AccessTime, hdr.ModTime
}

// dir returns a handle of the directory rel, creating it and its parents as
// needed. Every existing component must be a real directory; a whiteout
// left by this layer is replaced by an opaque directory.
func (im *importer) dir(rel string) (*dirHandle, error) {
	if rel == "" {
		return im.top, nil
	}
	im.tick++
	if h := im.cache[rel]; h != nil {
		h.used = im.tick
		return h, nil
	}
	parentRel, name := splitRel(rel)
	parent, err := im.dir(parentRel)
	if err != nil {
		return nil, err
	}
	opaque := false
	err = parent.root.Mkdir(name, 0o755)
	switch {
	case err == nil:
		opaque = im.replacedWhiteout(rel)
		im.setDirTimes(rel, im.entryTime, im.entryTime)
	case errors.Is(err, fs.ErrExist):
		fi, lerr := parent.root.Lstat(name)
		if lerr != nil {
			return nil, lerr
		}
		switch {
		case fi.IsDir():
		case isWhiteout(fi):
			if err := parent.root.Remove(name); err != nil {
				return nil, err
			}
			if err := parent.root.Mkdir(name, 0o755); err != nil {
				return nil, err
			}
			im.setDirTimes(rel, im.entryTime, im.entryTime)
			opaque = true
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, errorf(ErrUnsafePath, "path component %s is a symlink", rel)
		default:
			return nil, errorf(ErrInvalidEntry, "path component %s is not a directory", rel)
		}
	default:
		return nil, err
	}
	r, err := parent.root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	h := &dirHandle{rel: rel, root: r, used: im.tick}
	if len(im.cache) >= dirCacheSize {
		im.evict()
	}
	im.cache[rel] = h
	if opaque {
		if err := im.markOpaque(h); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// evict closes the least recently used cached directory.
func (im *importer) evict() {
	var victim *dirHandle
	for _, h := range im.cache {
		if victim == nil || h.used < victim.used {
			victim = h
		}
	}
	delete(im.cache, victim.rel)
	victim.close()
}

// lookupDir is dir without creating anything: every component of rel must
// already exist as a real directory.
func (im *importer) lookupDir(rel string) (*dirHandle, error) {
	if rel == "" {
		return im.top, nil
	}
	if h := im.cache[rel]; h != nil {
		im.tick++
		h.used = im.tick
		return h, nil
	}
	parentRel, name := splitRel(rel)
	parent, err := im.lookupDir(parentRel)
	if err != nil {
		return nil, err
	}
	fi, err := parent.root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errorf(ErrUnsafePath, "path component %s is not a directory", rel)
	}
	return im.dir(rel)
}

// replacedWhiteout is called after rel was created where nothing existed on
// disk: if the sidecar recorded a whiteout there, it is dropped, and true is
// returned (a directory must then become opaque).
func (im *importer) replacedWhiteout(rel string) bool {
	e := im.side.get(rel)
	if e == nil || !e.Whiteout {
		return false
	}
	e.Whiteout = false
	return true
}

func (im *importer) markOpaque(h *dirHandle) error {
	if !im.cfg.sidecarOnly {
		f, err := h.file()
		if err != nil {
			return err
		}
		err = setOpaque(f)
		if !errors.Is(err, errNoPlatform) {
			return err
		}
	}
	im.side.entry(h.rel).Opaque = true
	return nil
}

// create makes p with mk. Something already there is replaced only if it is
// a whiteout of this layer (then true is returned).
func (im *importer) create(h *dirHandle, p entryPath, mk func() error) (bool, error) {
	err := mk()
	if err == nil {
		return im.replacedWhiteout(p.rel), nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	fi, lerr := h.root.Lstat(p.base)
	if lerr != nil || !isWhiteout(fi) {
		return false, errorf(ErrInvalidEntry, "duplicate entry: %s already exists in this layer", p.rel)
	}
	if err := h.root.Remove(p.base); err != nil {
		return false, err
	}
	return true, mk()
}

// storeMeta stores recs of the entry rel with set, or in the sidecar when the
// platform or file system cannot hold them.
func (im *importer) storeMeta(rel string, recs records, set func(records) error) error {
	if len(recs) == 0 {
		return nil
	}
	if !im.cfg.sidecarOnly {
		err := set(recs)
		if !errors.Is(err, errNoPlatform) {
			return err
		}
	}
	im.side.entry(rel).Records = recs
	return nil
}

func (im *importer) setTimes(h *dirHandle, name string, hdr *tar.Header) error {
	f, err := h.file()
	if err != nil {
		return err
	}
	atime, mtime := entryTimes(hdr)
	return setTimes(h.root, f, name, atime, mtime)
}

func (im *importer) directory(p entryPath, hdr *tar.Header) error {
	if p.adsBase != "" {
		return errorf(ErrInvalidEntry, "directory name contains ':'")
	}
	recs, err := parseRecords(hdr)
	if err != nil {
		return err
	}
	if attr, ok := recs.fileAttr(); ok && attr&fileAttrDirectory == 0 {
		return errorf(ErrInvalidMetadata, "%s=%d lacks FILE_ATTRIBUTE_DIRECTORY on a directory", paxFileAttr, attr)
	}
	h, err := im.dir(p.rel)
	if err != nil {
		return err
	}
	err = im.storeMeta(p.rel, recs, func(r records) error {
		f, err := h.file()
		if err != nil {
			return err
		}
		return setFileRecords(f, r)
	})
	if err != nil {
		return err
	}
	atime, mtime := entryTimes(hdr)
	im.setDirTimes(p.rel, atime, mtime)
	return nil
}

// setDirTimes records the times of directory rel, set at the end.
func (im *importer) setDirTimes(rel string, atime, mtime time.Time) {
	if i, ok := im.times[rel]; ok {
		im.dirTimes[i].atime, im.dirTimes[i].mtime = atime, mtime
		return
	}
	im.times[rel] = len(im.dirTimes)
	im.dirTimes = append(im.dirTimes, dirTime{rel, atime, mtime})
}

func (im *importer) regular(tr io.Reader, p entryPath, hdr *tar.Header) error {
	var recs records
	if p.adsBase == "" {
		var err error
		if recs, err = parseRecords(hdr); err != nil {
			return err
		}
		if attr, ok := recs.fileAttr(); ok && attr&fileAttrDirectory != 0 {
			return errorf(ErrInvalidMetadata, "%s=%d has FILE_ATTRIBUTE_DIRECTORY on a file", paxFileAttr, attr)
		}
	}
	h, err := im.dir(p.parent)
	if err != nil {
		return err
	}
	if p.adsBase != "" {
		fi, err := h.root.Lstat(p.adsBase)
		if err != nil || !fi.Mode().IsRegular() {
			return errorf(ErrInvalidEntry, "alternate data stream without a file %q in this layer", joinRel(p.parent, p.adsBase))
		}
	}
	var f *os.File
	_, err = im.create(h, p, func() error {
		var err error
		f, err = h.root.OpenFile(p.base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		return err
	})
	if err != nil {
		return err
	}
	n, err := im.copyData(f, tr)
	im.written += n
	if err == nil {
		err = im.storeMeta(p.rel, recs, func(r records) error { return setFileRecords(f, r) })
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return im.setTimes(h, p.base, hdr)
}

func (im *importer) copyData(dst *os.File, src io.Reader) (int64, error) {
	if im.buf == nil {
		im.buf = copyBufPool.Get().(*[]byte)
	}
	buf := *im.buf
	var n int64
	for {
		if err := im.ctx.Err(); err != nil {
			return n, err
		}
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, werr
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

func (im *importer) symlink(p entryPath, hdr *tar.Header) error {
	recs, err := parseRecords(hdr)
	if err != nil {
		return err
	}
	target, err := convertLinkTarget(hdr.Linkname)
	if err != nil {
		return err
	}
	h, err := im.dir(p.parent)
	if err != nil {
		return err
	}
	if _, err := im.create(h, p, func() error { return h.root.Symlink(target, p.base) }); err != nil {
		return err
	}
	err = im.storeMeta(p.rel, recs, func(r records) error {
		f, err := h.file()
		if err != nil {
			return err
		}
		return setLinkRecords(f, p.base, r)
	})
	if err != nil {
		return err
	}
	return im.setTimes(h, p.base, hdr)
}

func (im *importer) hardlink(p entryPath, hdr *tar.Header) error {
	if p.adsBase != "" {
		return errorf(ErrInvalidEntry, "hard link name contains ':'")
	}
	t, skip, err := parseEntryName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	switch {
	case skip || t.parent == "":
		return errorf(ErrInvalidEntry, "hard link to %q", hdr.Linkname)
	case t.top == utilityVMDir:
		return errorf(ErrInvalidEntry, "hard link into UtilityVM/, which is not imported")
	case strings.HasPrefix(t.base, whiteoutPrefix):
		return errorf(ErrInvalidEntry, "hard link to a whiteout")
	case t.adsBase != "":
		// NTFS links files, not streams; a link to the stream's backing
		// file would export as an unrelated copy of the stream's data.
		return errorf(ErrInvalidEntry, "hard link to an alternate data stream")
	case t.rel == p.rel:
		return errorf(ErrInvalidEntry, "hard link to itself")
	}
	th, err := im.lookupDir(t.parent)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errorf(ErrInvalidEntry, "hard link target %q does not exist in this layer", hdr.Linkname)
		}
		return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	fi, err := th.root.Lstat(t.base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(ErrInvalidEntry, "hard link target %q does not exist in this layer", hdr.Linkname)
	case err != nil:
		return err
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0:
		return errorf(ErrInvalidEntry, "hard link target %q is not a file", hdr.Linkname)
	}
	h, err := im.dir(p.parent)
	if err != nil {
		return err
	}
	_, err = im.create(h, p, func() error {
		return im.root.Link(filepath.FromSlash(t.rel), filepath.FromSlash(p.rel))
	})
	if err != nil {
		return err
	}
	// Both names share the inode and so its xattrs; sidecar records are per
	// name, so copy them.
	if e := im.side.get(t.rel); e != nil && e.Records != nil {
		im.side.entry(p.rel).Records = e.Records
	}
	return nil
}

func (im *importer) whiteout(p entryPath) error {
	if p.top != filesDir {
		return errorf(ErrInvalidEntry, "whiteouts are only allowed under Files/")
	}
	name := strings.TrimPrefix(p.base, whiteoutPrefix)
	if p.base == opaqueWhiteout {
		if p.parent == filesDir {
			return errorf(ErrInvalidEntry, "cannot make Files/ opaque")
		}
		h, err := im.dir(p.parent)
		if err != nil {
			return err
		}
		return im.markOpaque(h)
	}
	switch {
	case name == "":
		return errorf(ErrInvalidEntry, "whiteout without a name")
	case name == "." || name == "..":
		return errorf(ErrUnsafePath, "whiteout of %q", name)
	case strings.HasPrefix(name, whiteoutPrefix):
		return errorf(ErrUnsupported, "whiteout metadata entry")
	case p.adsBase != "":
		return errorf(ErrInvalidEntry, "whiteout of an alternate data stream")
	}
	rel := joinRel(p.parent, name)
	h, err := im.dir(p.parent)
	if err != nil {
		return err
	}
	fi, err := h.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if e := im.side.get(rel); e != nil && e.Whiteout {
			return nil
		}
		if !im.cfg.sidecarOnly {
			f, err := h.file()
			if err != nil {
				return err
			}
			err = makeWhiteout(f, name)
			if !errors.Is(err, errNoPlatform) {
				return err
			}
		}
		im.side.entry(rel).Whiteout = true
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		// The layer deletes the lower directory and brings its own.
		dh, err := im.dir(rel)
		if err != nil {
			return err
		}
		return im.markOpaque(dh)
	default:
		// A whiteout already, or a file of this layer, which hides the
		// lower one anyway.
		return nil
	}
}
