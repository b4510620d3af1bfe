package layertar

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/winproc/winproc/internal/iocount"
	"github.com/winproc/winproc/snapshotter/layermount"
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
	im.startFiles()
	err = im.run(r)
	if ferr := im.stopFiles(); err == nil {
		err = ferr
	}
	if cerr := im.close(); err == nil && cerr != nil {
		err = fmt.Errorf("layertar: import: %w", cerr)
	}
	return im.f.written.Load(), err
}

type importer struct {
	ctx   context.Context
	cfg   importConfig
	root  *os.Root
	top   *dirHandle // the layer directory
	cache map[string]*dirHandle
	tick  uint64
	// f creates and writes the regular files (import_files.go).
	f    *files
	side sidecar
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
	for _, h := range im.cache {
		h.close()
	}
	if im.top.f != nil {
		im.top.f.Close()
	}
	return im.root.Close()
}

func (im *importer) run(r io.Reader) error {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()
	cr := &iocount.Reader{R: br}
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
		if err := im.f.failure(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			if d := cr.N - entryEnd; cr.N > 0 && (d < 512 || d%512 != 0) {
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
		entryEnd = cr.N
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
	if _, err := im.dir(layermount.FilesDir); err != nil {
		return fmt.Errorf("layertar: import: %w", err)
	}
	if err := im.stopFiles(); err != nil {
		return err
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
	if skip || p.top == layermount.UtilityVMDir {
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
