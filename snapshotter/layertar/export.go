package layertar

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/winproc/winproc/snapshotter/layermount"
)

// Unix file type bits, as go-winio's backuptar puts them in the tar mode.
const (
	modeDir     = 0o40000
	modeReg     = 0o100000
	modeSymlink = 0o120000
	modeLink    = 0o644 // what hcsshim writes for hard link entries
)

// ExportOption configures Export, FromTree and ExportDiff.
type ExportOption func(*exportConfig)

type exportConfig struct {
	timestamp  *time.Time
	emptyHives bool
}

// WithTimestamp sets every time written (mtime, atime, ctime and
// LIBARCHIVE.creationtime, whiteouts included) to t, for reproducible
// image builds. Without it, times come from the tree and whiteouts get the
// Unix epoch.
func WithTimestamp(t time.Time) ExportOption {
	return func(c *exportConfig) { c.timestamp = &t }
}

// WithEmptyHives makes FromTree and ExportDiff add an empty Hives/
// directory entry (as base layers have). Export writes the layer's own
// Hives/ and ignores it.
func WithEmptyHives() ExportOption {
	return func(c *exportConfig) { c.emptyHives = true }
}

type exportMode int

const (
	modeLayer exportMode = iota // a layer directory: Files/, Hives/, sidecar
	modeTree                    // a plain source tree, mapped to Files/
	modeDiff                    // an overlayfs upper directory, mapped to Files/
)

// Export writes the layer directory dir (as written by Import, or any tree
// with Files/ and optionally Hives/) to w as a Windows-format layer tar. See
// the package documentation for what is restored and the order.
func Export(ctx context.Context, w io.Writer, dir string, opts ...ExportOption) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("layertar: export: %w", err)
	}
	defer root.Close()
	side, err := loadSidecar(root)
	if err != nil {
		return fmt.Errorf("layertar: export: %w", err)
	}
	ex := newExporter(ctx, w, modeLayer, opts)
	defer ex.release()
	ex.useSidecar(side)
	for _, top := range []string{layermount.FilesDir, layermount.HivesDir} {
		fi, err := root.Lstat(top)
		if errors.Is(err, fs.ErrNotExist) && top == layermount.HivesDir {
			continue
		}
		if err != nil {
			return fmt.Errorf("layertar: export: not a layer directory: %w", err)
		}
		if !fi.IsDir() {
			return &EntryError{Name: top, Err: errorf(ErrInvalidEntry, "not a directory")}
		}
		if err := ex.subdir(root, top, top, top, fi, true); err != nil {
			return err
		}
	}
	return ex.close()
}

// FromTree writes a layer tar whose Files/ is the source tree src, for
// image tooling. Metadata stored in xattrs (see the package documentation)
// is used; everything else gets the defaults. Device nodes are rejected.
func FromTree(ctx context.Context, w io.Writer, src string, opts ...ExportOption) error {
	return exportTree(ctx, w, src, modeTree, opts)
}

// ExportDiff writes a layer tar of the changes recorded in an overlayfs
// upper directory (a container's scratch layer over the Files/ directories
// of its image layers), for the differ's Compare: the upper tree becomes
// Files/, its whiteouts (0/0 character devices) become ".wh." entries and
// its opaque directories become ".wh.<dir>" followed by the directory.
// Redirected directories and metacopy files (overlay redirect_dir/metacopy
// features), which need the lower layers, are reported as ErrUnsupported.
func ExportDiff(ctx context.Context, w io.Writer, upper string, opts ...ExportOption) error {
	return exportTree(ctx, w, upper, modeDiff, opts)
}

func exportTree(ctx context.Context, w io.Writer, src string, mode exportMode, opts []ExportOption) error {
	root, err := os.OpenRoot(src)
	if err != nil {
		return fmt.Errorf("layertar: export: %w", err)
	}
	defer root.Close()
	fi, err := root.Stat(".")
	if err != nil {
		return fmt.Errorf("layertar: export: %w", err)
	}
	ex := newExporter(ctx, w, mode, opts)
	defer ex.release()
	if err := ex.dirTree(root, "", layermount.FilesDir, fi, true); err != nil {
		return err
	}
	if ex.cfg.emptyHives {
		hdr := ex.header(layermount.HivesDir, tar.TypeDir, modeDir, fi, nil, defaultDirAttr)
		if err := ex.tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("layertar: export: %w", err)
		}
	}
	return ex.close()
}

type linkInfo struct {
	name string
	// basic are the records a Link entry repeats (like hcsshim): the
	// attributes and times the first name was written with.
	basic records
}

type exporter struct {
	ctx  context.Context
	cfg  exportConfig
	mode exportMode
	tw   *tar.Writer
	buf  *[]byte // from copyBufPool, taken on first use
	// links maps inodes with several names to the first name written.
	links map[fileKey]linkInfo
	side  *sidecar
	// sideWhiteouts maps a directory to the names the sidecar deletes in it.
	sideWhiteouts map[string][]string
}

func newExporter(ctx context.Context, w io.Writer, mode exportMode, opts []ExportOption) *exporter {
	ex := &exporter{
		ctx:   ctx,
		mode:  mode,
		tw:    tar.NewWriter(w),
		links: make(map[fileKey]linkInfo),
	}
	for _, o := range opts {
		o(&ex.cfg)
	}
	return ex
}

func (ex *exporter) useSidecar(s *sidecar) {
	ex.side = s
	if s == nil {
		return
	}
	ex.sideWhiteouts = make(map[string][]string)
	for rel, e := range s.Entries {
		if e.Whiteout {
			dir, name := splitRel(rel)
			ex.sideWhiteouts[dir] = append(ex.sideWhiteouts[dir], name)
		}
	}
}

func (ex *exporter) close() error {
	ex.release()
	if err := ex.tw.Close(); err != nil {
		return fmt.Errorf("layertar: export: %w", err)
	}
	return nil
}

func (ex *exporter) release() {
	if ex.buf != nil {
		copyBufPool.Put(ex.buf)
		ex.buf = nil
	}
}

// records returns the metadata of rel: the sidecar's if it has any, else the
// xattrs'. Invalid values are reported rather than written.
func (ex *exporter) records(rel string, fromXattrs records) (records, error) {
	recs := fromXattrs
	if e := ex.side.get(rel); e != nil && e.Records != nil {
		recs = e.Records
	}
	if len(recs) == 0 {
		return nil, nil
	}
	hdr := &tar.Header{PAXRecords: make(map[string]string, len(recs))}
	for k, v := range recs {
		switch k {
		case keyAtime, keyCtime:
			if _, err := parsePAXTime(v); err != nil {
				return nil, errorf(ErrInvalidMetadata, "stored %s=%q: %v", k, v, err)
			}
		default:
			hdr.PAXRecords[k] = v
		}
	}
	if _, err := parseRecords(hdr); err != nil {
		return nil, err
	}
	return recs, nil
}

// header builds the header of an entry from its file info and metadata,
// with the defaults for what is not stored.
func (ex *exporter) header(name string, typ byte, mode int64, fi fs.FileInfo, recs records, defAttr uint32) *tar.Header {
	mtime := fi.ModTime()
	atime, ctime := mtime, mtime
	pax := make(map[string]string, len(recs)+2)
	for k, v := range recs {
		switch k {
		case keyAtime:
			atime, _ = parsePAXTime(v)
		case keyCtime:
			ctime, _ = parsePAXTime(v)
		default:
			pax[k] = v
		}
	}
	if _, ok := pax[paxFileAttr]; !ok {
		pax[paxFileAttr] = strconv.FormatUint(uint64(defAttr), 10)
	}
	if _, ok := pax[paxCreationTime]; !ok {
		pax[paxCreationTime] = formatPAXTime(mtime)
	}
	if ts := ex.cfg.timestamp; ts != nil {
		mtime, atime, ctime = *ts, *ts, *ts
		pax[paxCreationTime] = formatPAXTime(*ts)
	}
	return &tar.Header{
		Format:     tar.FormatPAX,
		Name:       name,
		Typeflag:   typ,
		Mode:       mode,
		ModTime:    mtime,
		AccessTime: atime,
		ChangeTime: ctime,
		PAXRecords: pax,
	}
}

func (ex *exporter) writeWhiteout(tarName string) error {
	t := time.Unix(0, 0)
	if ex.cfg.timestamp != nil {
		t = *ex.cfg.timestamp
	}
	hdr := &tar.Header{Format: tar.FormatPAX, Name: tarName, Typeflag: tar.TypeReg, ModTime: t}
	if err := ex.tw.WriteHeader(hdr); err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	return nil
}

// subdir exports the directory name of parent, after checking that it is
// still the directory fi.
func (ex *exporter) subdir(parent *os.Root, name, rel, tarName string, fi fs.FileInfo, top bool) error {
	r, err := parent.OpenRoot(name)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	defer r.Close()
	return ex.dirTree(r, rel, tarName, fi, top)
}

func (ex *exporter) dirTree(r *os.Root, rel, tarName string, fi fs.FileInfo, top bool) error {
	f, err := r.Open(".")
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	if !os.SameFile(st, fi) {
		return &EntryError{Name: tarName, Err: errors.New("changed during export")}
	}
	xs, err := readFileXattrs(f)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	if ex.mode == modeDiff && xs.redirect {
		return &EntryError{Name: tarName, Err: errorf(ErrUnsupported, "overlay redirected directory")}
	}
	recs, err := ex.records(rel, xs.recs)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	opaque := xs.opaque
	if e := ex.side.get(rel); e != nil && e.Opaque {
		opaque = true
	}
	if opaque && !top && ex.mode != modeTree && strings.HasPrefix(tarName, layermount.FilesDir+"/") {
		dir, base := splitRel(tarName)
		if err := ex.writeWhiteout(joinRel(dir, whiteoutPrefix+base)); err != nil {
			return err
		}
	}
	if err := ex.tw.WriteHeader(ex.header(tarName, tar.TypeDir, modeDir, st, recs, defaultDirAttr)); err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	return ex.walk(r, f, rel, tarName)
}

type exportNode struct {
	name     string // on disk
	emit     string // in the tar
	fi       fs.FileInfo
	whiteout bool
	streams  []string // alternate data streams, on-disk names "file:stream"
}

// walk writes the children of the directory f (rel on disk, tarName in the
// tar) in byte order of their tar names, depth first.
func (ex *exporter) walk(r *os.Root, f *os.File, rel, tarName string) error {
	ents, err := f.ReadDir(-1)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	nodes := make([]exportNode, 0, len(ents))
	index := make(map[string]int, len(ents))
	var streams map[string][]string
	for _, e := range ents {
		name := e.Name()
		path := joinRel(tarName, name)
		if err := checkDiskName(name); err != nil {
			return &EntryError{Name: path, Err: err}
		}
		if file, stream, ok := strings.Cut(name, ":"); ok {
			if file == "" || stream == "" || strings.IndexByte(stream, ':') >= 0 {
				return &EntryError{Name: path, Err: errorf(ErrInvalidEntry, "':' in a name that is not an alternate data stream")}
			}
			if streams == nil {
				streams = make(map[string][]string)
			}
			streams[file] = append(streams[file], name)
			continue
		}
		fi, err := r.Lstat(name)
		if err != nil {
			return &EntryError{Name: path, Err: err}
		}
		n := exportNode{name: name, emit: name, fi: fi}
		switch {
		case fi.IsDir(), fi.Mode().IsRegular(), fi.Mode()&fs.ModeSymlink != 0:
		case ex.mode != modeTree && isWhiteout(fi):
			if !strings.HasPrefix(path, layermount.FilesDir+"/") {
				return &EntryError{Name: path, Err: errorf(ErrInvalidEntry, "whiteouts are only allowed under Files/")}
			}
			n.emit, n.whiteout = whiteoutPrefix+name, true
		default:
			return &EntryError{Name: path, Err: errorf(ErrUnsupported, "file type %v", fi.Mode().Type())}
		}
		index[name] = len(nodes)
		nodes = append(nodes, n)
	}
	for _, name := range ex.sideWhiteouts[rel] {
		if _, ok := index[name]; ok {
			return &EntryError{Name: joinRel(tarName, name), Err: errorf(ErrInvalidEntry, "exists but %s records a whiteout", sidecarName)}
		}
		nodes = append(nodes, exportNode{name: name, emit: whiteoutPrefix + name, whiteout: true})
	}
	for file, list := range streams {
		i, ok := index[file]
		if !ok || !nodes[i].fi.Mode().IsRegular() {
			sort.Strings(list)
			return &EntryError{Name: joinRel(tarName, list[0]), Err: errorf(ErrInvalidEntry, "alternate data stream without a regular file %q", file)}
		}
		sort.Strings(list)
		nodes[i].streams = list
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].emit < nodes[j].emit })

	for _, n := range nodes {
		if err := ex.ctx.Err(); err != nil {
			return fmt.Errorf("layertar: export: %w", err)
		}
		childRel, childTar := joinRel(rel, n.name), joinRel(tarName, n.emit)
		var err error
		switch {
		case n.whiteout:
			err = ex.writeWhiteout(childTar)
		case n.fi.IsDir():
			err = ex.subdir(r, n.name, childRel, childTar, n.fi, false)
		case n.fi.Mode().IsRegular():
			err = ex.file(r, n, childRel, childTar, tarName)
		default:
			err = ex.symlink(r, f, n, childRel, childTar)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
