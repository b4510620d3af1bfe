// Package record keeps what a compute backend must remember about a
// system it created beyond the host's own state: one small JSON file per
// system in the backend's state directory, such as the scratch layer it
// mounted. containerd's `shim delete` after the serving shim died opens the
// system from another process, and only the record tells it what to
// release. The HCS and HostProcess backends keep one each. Each names the
// shim that serves its system (Shim), and Why is the rule by which a
// system no running shim serves is an orphan.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/containerd/containerd/v2/pkg/sys"
	"github.com/containerd/errdefs"
)

// idPattern is what a system id may look like to name its record: what
// containerd allows for container ids (and more), and nothing that could
// leave the directory.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// CheckID refuses a system id that cannot name a record
// (errdefs.ErrInvalidArgument).
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("compute system id %q: ids are 1 to 200 letters, digits, '.', '_' and '-', starting with a letter or digit: %w", id, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Dir is a state directory of records, <Dir>/<id>.json. The serving shim
// and the delete subcommand must use the same one, a directory that
// outlives a shim. "" keeps nothing: Write does nothing and Read finds
// nothing.
type Dir string

// Path is the file of id's record.
func (d Dir) Path(id string) string {
	return filepath.Join(string(d), id+".json")
}

// Write records v, JSON, for id atomically: a reader sees the old record
// or the new one. The directory is made for Administrators and SYSTEM only,
// as containerd's own state.
func (d Dir) Write(id string, v any) error {
	if d == "" {
		return nil
	}
	if err := sys.MkdirAllWithACL(string(d), 0o700); err != nil {
		return fmt.Errorf("create the state directory %s: %w", d, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(string(d), id+".*.tmp")
	if err != nil {
		return fmt.Errorf("record what %s holds: %w", id, err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rename(tmp.Name(), d.Path(id))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("record what %s holds: %w", id, err)
	}
	return nil
}

// Read decodes the record of id into v and reports whether there is one.
func (d Dir) Read(id string, v any) (bool, error) {
	if d == "" {
		return false, nil
	}
	f, err := openRecord(d.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the record of %s: %w", id, err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("read the record of %s: %w", id, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("record %s is not valid: %w", d.Path(id), err)
	}
	return true, nil
}

// Remove deletes the record of id; a missing record is no error.
func (d Dir) Remove(id string) error {
	if d == "" {
		return nil
	}
	if err := os.Remove(d.Path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the record of %s: %w", id, err)
	}
	return nil
}

// IDs lists the ids of the records in the directory; none when it does
// not exist.
func (d Dir) IDs() ([]string, error) {
	if d == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the records of %s: %w", d, err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() && CheckID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
