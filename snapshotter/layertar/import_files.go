package layertar

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Import runs in stages. The importer reads the tar (and whatever
// decompresses it), checks every entry, and makes directories, links,
// symlinks and whiteouts itself; regular files go to a few workers, which
// create them, store their metadata, write the data the importer reads for
// them, set their times and close them. Creating files is most of an
// import's time, spent in the kernel (on ext4, inode allocation), and
// GNU tar does it one file after another; here creation, writing, reading
// and decompression overlap.
//
// An entry that looks at a name a worker is still creating (a duplicate, a
// hard link to it, a stream of it, a whiteout of it, a directory below it)
// waits for that file first (settle), so every check sees the tree as a
// sequential import would.

const (
	// fileWorkers is how many files are created at once.
	fileWorkers = 2
	// chunksInFlight bounds the file data read ahead of the workers, in
	// chunks of copyBufferSize.
	chunksInFlight = 16
)

// files is the importer's pool of file workers.
type files struct {
	jobs    chan *fileJob
	chunks  chan struct{} // a token per chunk in flight
	wg      sync.WaitGroup
	written atomic.Int64
	failed  atomic.Bool
	mu      sync.Mutex
	err     error // the first failure, an *EntryError
	stopped bool
	// pending are the files handed to workers whose creation the importer
	// has not yet seen end, by rel and in order.
	pending map[string]*fileJob
	queue   []*fileJob
}

// chunk is file data: n bytes of buf, from copyBufPool.
type chunk struct {
	buf *[]byte
	n   int
}

// fileJob is one regular file for a worker.
type fileJob struct {
	p            entryPath
	dir          *dirHandle // p.parent, held for the job
	name         string     // the tar entry, for errors
	recs         records
	atime, mtime time.Time
	data         chan chunk    // its data, closed at its end
	created      chan struct{} // closed once it exists with its metadata, or failed to
	// abort, set before data is closed, says its data ended early.
	abort bool
}

func (im *importer) startFiles() {
	im.f = &files{
		jobs:    make(chan *fileJob, fileWorkers),
		chunks:  make(chan struct{}, chunksInFlight),
		pending: map[string]*fileJob{},
	}
	for range fileWorkers {
		im.f.wg.Add(1)
		go func() {
			defer im.f.wg.Done()
			for j := range im.f.jobs {
				im.writeFile(j)
			}
		}()
	}
}

// stopFiles waits for every file handed out and returns the first
// failure. It may be called again.
func (im *importer) stopFiles() error {
	if !im.f.stopped {
		im.f.stopped = true
		close(im.f.jobs)
	}
	im.f.wg.Wait()
	return im.f.failure()
}

func (f *files) fail(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = &EntryError{Name: name, Err: err}
		f.failed.Store(true)
	}
}

// failure returns the workers' first failure so far.
func (f *files) failure() error {
	if !f.failed.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// settle waits until the file rel, if a worker is creating it, exists.
func (im *importer) settle(rel string) {
	if j := im.f.pending[rel]; j != nil {
		<-j.created
		delete(im.f.pending, rel)
	}
}

// addFile hands the regular file p, entry name, to a worker, with its data
// read from r.
func (im *importer) addFile(dir *dirHandle, p entryPath, name string, recs records, r io.Reader, atime, mtime time.Time) error {
	f := im.f
	// Forget the files whose creation has ended, oldest first.
	for len(f.queue) > 0 && closed(f.queue[0].created) {
		if f.pending[f.queue[0].p.rel] == f.queue[0] {
			delete(f.pending, f.queue[0].p.rel)
		}
		f.queue = f.queue[1:]
	}
	dir.hold()
	j := &fileJob{p: p, dir: dir, name: name, recs: recs, atime: atime, mtime: mtime,
		data: make(chan chunk, chunksInFlight), created: make(chan struct{})}
	f.pending[p.rel] = j
	f.queue = append(f.queue, j)
	f.jobs <- j
	defer close(j.data)
	for {
		f.chunks <- struct{}{}
		buf := copyBufPool.Get().(*[]byte)
		n, err := readChunk(r, *buf)
		if n > 0 {
			j.data <- chunk{buf, n}
		} else {
			copyBufPool.Put(buf)
			<-f.chunks
		}
		if err == nil {
			err = im.ctx.Err()
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			j.abort = true
			return err
		}
	}
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readChunk fills buf from r; io.EOF means the entry's data ended (n bytes
// of it may still be in buf).
func readChunk(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		nr, err := r.Read(buf[n:])
		n += nr
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// writeFile is a worker's part of the file j: everything but reading its
// data. Its chunks are taken (and given back) even after a failure.
func (im *importer) writeFile(j *fileJob) {
	var f *os.File
	err := im.f.failure()
	if err == nil {
		f, err = im.createFile(j)
	}
	j.dir.release()
	close(j.created)
	for c := range j.data {
		if err == nil {
			var n int
			n, err = f.Write((*c.buf)[:c.n])
			im.f.written.Add(int64(n))
		}
		copyBufPool.Put(c.buf)
		<-im.f.chunks
	}
	if f != nil {
		if err == nil && !j.abort {
			err = setFileTimes(f, j.atime, j.mtime)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && !j.abort {
		im.f.fail(j.name, err)
	}
}

// createFile creates the file of j, replacing a whiteout of this layer, and
// stores its metadata.
func (im *importer) createFile(j *fileJob) (*os.File, error) {
	var f *os.File
	root := j.dir.root
	_, err := im.create(root, j.p.base, j.p.rel, func() error {
		var err error
		f, err = root.OpenFile(j.p.base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := im.storeMeta(j.p.rel, j.recs, func(r records) error { return setFileRecords(f, r) }); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
