package process

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
)

// logURI is a stdout destination containerd gives as a URI instead of a
// fifo or named pipe: `ctr run --log-uri`, nerdctl's logging drivers
// (containerd's cio.LogURI, cio.BinaryIO, cio.LogFile). Stderr then names
// the same URI and is not read, as in runhcs and containerd's runc shim.
type logURI struct {
	// binary is set for binary://PATH?ARGS: a logging program the
	// process's output is piped to. Otherwise the URI is file://PATH, a
	// file both streams are appended to.
	binary bool
	// path is the program or file, a path of this platform.
	path string
	// args are the program's arguments: each query key, then its value
	// when not empty.
	args []string
}

// parseLogURI reads stdout as a log URI; it returns nil for a fifo or pipe
// path, which is connected as before. A one-letter scheme is a Windows
// drive (C:\...), not a URI.
func parseLogURI(stdout string) (*logURI, error) {
	u, err := url.Parse(stdout)
	if err != nil || len(u.Scheme) <= 1 {
		return nil, nil
	}
	l := &logURI{}
	switch u.Scheme {
	case "binary":
		l.binary = true
	case "file":
	default:
		return nil, fmt.Errorf("stdout %q: log URI scheme %q is not supported: use binary:///PATH, file:///PATH or a pipe: %w", stdout, u.Scheme, errdefs.ErrInvalidArgument)
	}
	if l.path, err = uriPath(u); err != nil {
		return nil, fmt.Errorf("stdout %q: %w", stdout, err)
	}
	if l.binary {
		l.args = queryArgs(u.Query())
	}
	return l, nil
}

// uriPath is the local path of u. It matches containerd's
// cio.LogURIGenerator (pkg/cio/io.go), which writes a Windows path
// C:\logs\x as /C:/logs/x, and refuses UNC paths as runhcs's
// sanitizePath (hcsshim internal/cmd/io_binary.go) does.
func uriPath(u *url.URL) (string, error) {
	if u.Host != "" {
		return "", fmt.Errorf("the URI names host %q: a log URI takes a local path after three slashes, as %s:///C:/logs/app.log: %w", u.Host, u.Scheme, errdefs.ErrInvalidArgument)
	}
	p := u.Path
	if len(p) >= 3 && p[0] == '/' && p[2] == ':' && isLetter(p[1]) {
		p = p[1:]
	}
	if strings.HasPrefix(p, "//") {
		return "", fmt.Errorf("UNC path %s is not allowed for a log URI: use a local path: %w", p, errdefs.ErrInvalidArgument)
	}
	p = filepath.FromSlash(path.Clean(p))
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute: %w", u.Path, errdefs.ErrInvalidArgument)
	}
	return p, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// queryArgs are a logging binary's arguments, in key order so that a URI
// always gives the same command line (containerd's NewBinaryCmd and
// runhcs's newBinaryCmd walk the query map in random order; runhcs also
// drops an empty value, as here).
func queryArgs(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		args = append(args, k)
		if v := q[k]; len(v) > 0 && v[0] != "" {
			args = append(args, v[0])
		}
	}
	return args
}
