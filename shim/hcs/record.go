package hcs

import (
	"fmt"

	winrecord "github.com/winproc/winproc/shim/record"
)

// A record is what the backend must remember about a system it created
// beyond HCS's own state: the scratch layer it activated, and whether it
// made a Container Credential Guard instance. HCS's properties do not
// include the layer folder, yet
// releasing the scratch needs it, also from a shim that did not create the
// system: containerd's `shim delete` after the serving shim died calls Open,
// then Close. So Create writes one small JSON file per system,
// <StateDir>/<id>.json (shim/record), before it activates the scratch, and
// it is removed once the scratch is deactivated.
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
	// Shim is the shim that created the system: once it is gone, and
	// containerd has no task of the system, the system is an orphan
	// (orphans.go).
	Shim winrecord.Shim `json:"shim"`
}

func checkID(id string) error { return winrecord.CheckID(id) }

// records is the record directory; a zero records (no StateDir) keeps
// nothing.
type records struct {
	dir string
}

func (r records) path(id string) string { return winrecord.Dir(r.dir).Path(id) }

// write records rec atomically: a reader sees the old record or the new
// one.
func (r records) write(rec record) error { return winrecord.Dir(r.dir).Write(rec.ID, rec) }

// read returns the record of id, or nil when there is none.
func (r records) read(id string) (*record, error) {
	var rec record
	ok, err := winrecord.Dir(r.dir).Read(id, &rec)
	if !ok || err != nil {
		return nil, err
	}
	if rec.ID != id || rec.Scratch == "" {
		return nil, fmt.Errorf("layer record %s is for %q with scratch %q, not for %s", r.path(id), rec.ID, rec.Scratch, id)
	}
	return &rec, nil
}

// remove deletes the record of id; a missing record is no error.
func (r records) remove(id string) error { return winrecord.Dir(r.dir).Remove(id) }
