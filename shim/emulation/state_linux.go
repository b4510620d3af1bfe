//go:build linux

package emulation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/winproc/winproc/shim/compute"
)

// The layout of a system's directory, Root/<id>/.
const (
	stateFile   = "state.json"
	prefixDir   = "prefix"       // the system's Wine prefix: an overlay mount
	prefixUpper = "prefix-upper" // its overlay upper directory
	prefixWork  = "prefix-work"  // its overlay work directory
	cDir        = "c"            // drive C:: an overlay mount of the layers
)

// persisted is state.json: what a later Open (the shim's delete
// subcommand, after the shim that created the system died) needs to find
// and tear the system down. The teardown itself does not depend on it: it
// finds the mounts in /proc/self/mountinfo and the processes by their
// WINEPREFIX, so a system whose creation died halfway is cleaned up too.
type persisted struct {
	Version        int                       `json:"version"`
	ID             string                    `json:"id"`
	TemplatePrefix string                    `json:"templatePrefix"`
	Layers         compute.Layers            `json:"layers"`
	Mapped         []compute.MappedDirectory `json:"mappedDirectories,omitempty"`
	// Resources are the system's limits: enforced through LimitCgroups
	// where the machine has the controllers (limits_linux.go).
	Resources compute.Resources `json:"resources"`
	// LimitCgroups are the silo's cgroup v1 directories, by controller.
	LimitCgroups map[string]string `json:"limitCgroups,omitempty"`
	// Mounts are the mount points made, in order.
	Mounts []string `json:"mounts"`
	// Started is when Start started the wineserver; nil before.
	Started *time.Time `json:"started,omitempty"`
	// ServerPID is the wineserver's pid and ServerStart its start time in
	// clock ticks after boot, which tell it from a later process that got
	// its pid.
	ServerPID   int    `json:"wineserverPid,omitempty"`
	ServerStart uint64 `json:"wineserverStart,omitempty"`
	// ServerDir is the wineserver's socket directory (under /tmp), removed
	// at teardown.
	ServerDir string `json:"wineserverDir,omitempty"`
	// ShimPID and ShimStart are the shim that created the system and
	// serves it: while that process runs the system is its; once it is
	// gone and containerd has no task of the id, the system is an orphan
	// (orphans_linux.go).
	ShimPID   int    `json:"shimPid,omitempty"`
	ShimStart uint64 `json:"shimStart,omitempty"`
	// NetNS is the Linux network namespace the silo's processes are
	// started in (netns_linux.go), "" for the shim's own.
	NetNS string `json:"netns,omitempty"`
	// Cgroup is the silo's cgroup v2 directory (cgroup_linux.go), "" on a
	// machine that offers none.
	Cgroup string `json:"cgroup,omitempty"`
	// HostProcess is set for a HostProcess container, which runs in the
	// host prefix (hostprocess_linux.go) and has no prefix, C: or
	// wineserver of its own.
	HostProcess *hostProcessState `json:"hostProcess,omitempty"`
	// Teardown is set while a teardown that could not finish is carried
	// on in the background (carryon_linux.go), and after it was given up.
	Teardown *teardownRecord `json:"teardown,omitempty"`
}

const stateVersion = 1

// saveState writes dir/state.json atomically.
func saveState(dir string, st *persisted) error {
	b, err := json.MarshalIndent(st, "", "\t")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, stateFile+".*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := firstErr(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, stateFile)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

// loadState reads dir/state.json.
func loadState(dir string) (*persisted, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var st persisted
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &st, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
