package hcs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/containerd/containerd/v2/pkg/sys"
)

// A record is what the backend must remember about a system it created
// beyond HCS's own state: the scratch layer it activated, and whether it
// made a Container Credential Guard instance. HCS's properties do not
// include the layer folder, yet
// releasing the scratch needs it, also from a shim that did not create the
// system: containerd's `shim delete` after the serving shim died calls Open,
// then Close. So Create writes one small JSON file per system,
// <StateDir>/<id>.json, before it activates the scratch, and it is removed
// once the scratch is deactivated.
type record struct {
	// ID is the system's id, for a reader of the directory.
	ID string `json:"id"`
	// Scratch is the scratch layer directory the system activated and
	// prepared.
	Scratch string `json:"scratch"`
	// CredentialGuard is set while the system has a Container Credential
	// Guard instance (a gMSA container), which is removed with the
	// scratch.
	CredentialGuard bool `json:"credentialGuard,omitempty"`
}

// idPattern is what a system id may look like to name its record: what
// containerd allows for container ids (and more), and nothing that could
// leave StateDir.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

func checkID(id string) error {
	if !idPattern.MatchString(id) {
		return invalid("compute system id %q: ids are 1 to 200 letters, digits, '.', '_' and '-', starting with a letter or digit", id)
	}
	return nil
}

// records is the record directory; a zero records (no StateDir) keeps
// nothing.
type records struct {
	dir string
}

func (r records) path(id string) string {
	return filepath.Join(r.dir, id+".json")
}

// write records rec atomically: a reader sees the old record or the new
// one.
func (r records) write(rec record) error {
	if r.dir == "" {
		return nil
	}
	// For Administrators and SYSTEM only, as containerd's own state.
	if err := sys.MkdirAllWithACL(r.dir, 0o700); err != nil {
		return fmt.Errorf("create the HCS backend's state directory: %w", err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(r.dir, rec.ID+".*.tmp")
	if err != nil {
		return fmt.Errorf("record the layers of %s: %w", rec.ID, err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), r.path(rec.ID))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("record the layers of %s: %w", rec.ID, err)
	}
	return nil
}

// read returns the record of id, or nil when there is none.
func (r records) read(id string) (*record, error) {
	if r.dir == "" {
		return nil, nil
	}
	b, err := os.ReadFile(r.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the layer record of %s: %w", id, err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("layer record %s is not valid: %w", r.path(id), err)
	}
	if rec.ID != id || rec.Scratch == "" {
		return nil, fmt.Errorf("layer record %s is for %q with scratch %q, not for %s", r.path(id), rec.ID, rec.Scratch, id)
	}
	return &rec, nil
}

// remove deletes the record of id; a missing record is no error.
func (r records) remove(id string) error {
	if r.dir == "" {
		return nil
	}
	if err := os.Remove(r.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the layer record of %s: %w", id, err)
	}
	return nil
}
