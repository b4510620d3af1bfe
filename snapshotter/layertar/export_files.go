package layertar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The entries of the files walk finds: regular files with their data and
// alternate data streams, symlinks, and Link entries for further names of
// an inode already written.

// hardlink writes a Link entry if fi is an inode already written under
// another name and returns its header; otherwise it returns nil.
func (ex *exporter) hardlink(tarName string, fi fs.FileInfo) (*tar.Header, error) {
	key, ok := hardlinkKey(fi)
	if !ok {
		return nil, nil
	}
	first, ok := ex.links[key]
	if !ok {
		return nil, nil
	}
	// Like hcsshim: the basic info (attributes, times) and no content.
	hdr := ex.header(tarName, tar.TypeLink, modeLink, fi, first.basic, defaultFileAttr)
	hdr.Linkname = first.name
	if err := ex.tw.WriteHeader(hdr); err != nil {
		return nil, &EntryError{Name: tarName, Err: err}
	}
	return hdr, nil
}

func (ex *exporter) rememberLink(hdr *tar.Header, fi fs.FileInfo, recs records) {
	key, ok := hardlinkKey(fi)
	if !ok {
		return
	}
	basic := records{
		paxFileAttr:     hdr.PAXRecords[paxFileAttr],
		paxCreationTime: hdr.PAXRecords[paxCreationTime],
	}
	for _, k := range []string{keyAtime, keyCtime} {
		if v, ok := recs[k]; ok {
			basic[k] = v
		}
	}
	ex.links[key] = linkInfo{name: hdr.Name, basic: basic}
}

func (ex *exporter) file(r *os.Root, n exportNode, rel, tarName, tarDir string) error {
	hdr, err := ex.fileData(r, n, rel, tarName)
	if err != nil {
		return err
	}
	// Streams belong to this name (also when it is a Link entry).
	for _, s := range n.streams {
		if err := ex.stream(r, s, joinRel(tarDir, s), hdr); err != nil {
			return err
		}
	}
	return nil
}

// fileData writes the entry of a regular file: a Link entry if its inode
// was written already, else the file with its content. It returns the header.
func (ex *exporter) fileData(r *os.Root, n exportNode, rel, tarName string) (*tar.Header, error) {
	if hdr, err := ex.hardlink(tarName, n.fi); hdr != nil || err != nil {
		return hdr, err
	}
	f, st, err := openRegular(r, n.name, n.fi)
	if err != nil {
		return nil, &EntryError{Name: tarName, Err: err}
	}
	defer f.Close()
	xs, err := readFileXattrs(f)
	if err != nil {
		return nil, &EntryError{Name: tarName, Err: err}
	}
	if ex.mode == modeDiff && xs.metacopy {
		return nil, &EntryError{Name: tarName, Err: errorf(ErrUnsupported, "overlay metacopy file (data in a lower layer)")}
	}
	recs, err := ex.records(rel, xs.recs)
	if err != nil {
		return nil, &EntryError{Name: tarName, Err: err}
	}
	hdr := ex.header(tarName, tar.TypeReg, modeReg, st, recs, defaultFileAttr)
	hdr.Size = st.Size()
	if err := ex.tw.WriteHeader(hdr); err != nil {
		return nil, &EntryError{Name: tarName, Err: err}
	}
	if err := ex.copyData(f, hdr.Size); err != nil {
		return nil, &EntryError{Name: tarName, Err: err}
	}
	ex.rememberLink(hdr, st, recs)
	return hdr, nil
}

// stream writes the alternate data stream file name, after its file base.
func (ex *exporter) stream(r *os.Root, name, tarName string, base *tar.Header) error {
	fi, err := r.Lstat(name)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return &EntryError{Name: tarName, Err: errorf(ErrInvalidEntry, "alternate data stream is not a regular file")}
	}
	f, st, err := openRegular(r, name, fi)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	defer f.Close()
	hdr := &tar.Header{
		Format:     tar.FormatPAX,
		Name:       tarName,
		Typeflag:   tar.TypeReg,
		Mode:       base.Mode,
		Size:       st.Size(),
		ModTime:    base.ModTime,
		AccessTime: base.AccessTime,
		ChangeTime: base.ChangeTime,
	}
	if err := ex.tw.WriteHeader(hdr); err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	if err := ex.copyData(f, hdr.Size); err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	return nil
}

// openRegular opens name for reading and checks that it is the regular
// file fi found by Lstat (os.Root would follow a symlink swapped in).
func openRegular(r *os.Root, name string, fi fs.FileInfo) (*os.File, fs.FileInfo, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && (!st.Mode().IsRegular() || !os.SameFile(st, fi)) {
		err = errors.New("changed during export")
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

func (ex *exporter) copyData(f *os.File, size int64) error {
	if ex.buf == nil {
		ex.buf = copyBufPool.Get().(*[]byte)
	}
	var n int64
	for n < size {
		if err := ex.ctx.Err(); err != nil {
			return err
		}
		b := *ex.buf
		if rem := size - n; rem < int64(len(b)) {
			b = b[:rem]
		}
		nr, err := f.Read(b)
		if nr > 0 {
			if _, werr := ex.tw.Write(b[:nr]); werr != nil {
				return werr
			}
			n += int64(nr)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if n != size {
		return fmt.Errorf("file shrank from %d to %d bytes during export", size, n)
	}
	return nil
}

func (ex *exporter) symlink(r *os.Root, dir *os.File, n exportNode, rel, tarName string) error {
	if hdr, err := ex.hardlink(tarName, n.fi); hdr != nil || err != nil {
		return err
	}
	target, err := r.Readlink(n.name)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	xs, err := readLinkXattrs(dir, n.name)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	recs, err := ex.records(rel, xs.recs)
	if err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	hdr := ex.header(tarName, tar.TypeSymlink, modeSymlink, n.fi, recs, defaultSymlinkAttr)
	hdr.Linkname = target
	if err := ex.tw.WriteHeader(hdr); err != nil {
		return &EntryError{Name: tarName, Err: err}
	}
	ex.rememberLink(hdr, n.fi, recs)
	return nil
}
