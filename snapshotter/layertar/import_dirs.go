package layertar

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"
)

// The importer reaches every directory of the layer through a handle opened
// under the layer's os.Root, one component at a time, so no name in the tar
// can lead outside the layer, and keeps the most recently used handles open.

// dirHandle is an open directory of the layer, known to be a real
// directory (no symlink on its path). File workers hold it while they
// create a file in it; evicted while held, it is closed by the last holder.
type dirHandle struct {
	rel  string
	root *os.Root
	f    *os.File // opened on demand, for fd based calls
	used uint64

	mu      sync.Mutex
	holders int
	evicted bool
}

func (h *dirHandle) hold() {
	h.mu.Lock()
	h.holders++
	h.mu.Unlock()
}

func (h *dirHandle) release() {
	h.mu.Lock()
	h.holders--
	last := h.holders == 0 && h.evicted
	h.mu.Unlock()
	if last {
		h.close()
	}
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
	im.settle(rel)
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
	victim.mu.Lock()
	victim.evicted = true
	held := victim.holders > 0
	victim.mu.Unlock()
	if !held {
		victim.close()
	}
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
	im.settle(rel)
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

// setDirTimes records the times of directory rel, set at the end.
func (im *importer) setDirTimes(rel string, atime, mtime time.Time) {
	if i, ok := im.times[rel]; ok {
		im.dirTimes[i].atime, im.dirTimes[i].mtime = atime, mtime
		return
	}
	im.times[rel] = len(im.dirTimes)
	im.dirTimes = append(im.dirTimes, dirTime{rel, atime, mtime})
}
