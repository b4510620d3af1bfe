package layertar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/winproc/winproc/snapshotter/layermount"
)

// One function per kind of tar entry: each validates the entry, creates it
// through the directory handles (import_dirs.go) and stores its metadata in
// xattrs or the sidecar.

// create makes the entry rel, name in root, with mk. Something already
// there is replaced only if it is a whiteout of this layer (then true is
// returned).
func (im *importer) create(root *os.Root, name, rel string, mk func() error) (bool, error) {
	err := mk()
	if err == nil {
		return im.replacedWhiteout(rel), nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	fi, lerr := root.Lstat(name)
	if lerr != nil || !isWhiteout(fi) {
		return false, errorf(ErrInvalidEntry, "duplicate entry: %s already exists in this layer", rel)
	}
	if err := root.Remove(name); err != nil {
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
		im.settle(joinRel(p.parent, p.adsBase))
		fi, err := h.root.Lstat(p.adsBase)
		if err != nil || !fi.Mode().IsRegular() {
			return errorf(ErrInvalidEntry, "alternate data stream without a file %q in this layer", joinRel(p.parent, p.adsBase))
		}
	}
	im.settle(p.rel)
	atime, mtime := entryTimes(hdr)
	return im.addFile(h, p, hdr.Name, recs, tr, atime, mtime)
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
	im.settle(p.rel)
	if _, err := im.create(h.root, p.base, p.rel, func() error { return h.root.Symlink(target, p.base) }); err != nil {
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
	case t.top == layermount.UtilityVMDir:
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
	im.settle(t.rel)
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
	im.settle(p.rel)
	_, err = im.create(h.root, p.base, p.rel, func() error {
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
	if p.top != layermount.FilesDir {
		return errorf(ErrInvalidEntry, "whiteouts are only allowed under Files/")
	}
	name := strings.TrimPrefix(p.base, whiteoutPrefix)
	if p.base == opaqueWhiteout {
		if p.parent == layermount.FilesDir {
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
	im.settle(rel)
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
