package doctor

import (
	"fmt"
	"time"
)

// Termination is a compute system whose teardown could not finish when
// its shim released it and is carried on in the background by that shim
// (or was given up after ten minutes, for the shim's delete or -fix).
type Termination struct {
	Namespace, ID string
	Attempts      int
	LastError     string
	Since         time.Time
	// GiveUp is when the shim stops trying, where it says (HCS).
	GiveUp time.Time
}

// String is the termination's line in the check's details.
func (t Termination) String() string {
	who := t.ID
	if t.Namespace != "" {
		who = t.Namespace + "/" + t.ID
	}
	line := fmt.Sprintf("%s: %d attempts since %s, last error: %s", who, t.Attempts, t.Since.Format(time.RFC3339), t.LastError)
	if !t.GiveUp.IsZero() {
		line += "; its shim gives up at " + t.GiveUp.Format(time.RFC3339)
	}
	return line
}

// checkTerminations lists the teardowns pending on the node. They are no
// failure: the shim retries them; one that stays is an orphan once its
// shim has exited, which the orphans check removes.
func (d *run) checkTerminations() {
	state := defaultStateDir(d.goos)
	if d.cfg != nil && d.cfg.State != "" {
		state = d.cfg.State
	}
	r := Result{Name: CheckTerminations, Status: OK}
	pending, err := localTerminations(state)
	switch {
	case err != nil:
		r.Status, r.Summary = Warn, fmt.Sprintf("cannot look for pending teardowns under %s: %v", state, err)
	case len(pending) == 0:
		r.Summary = "none"
	default:
		r.Status = Warn
		r.Summary = fmt.Sprintf("%d compute systems are still being torn down", len(pending))
		for _, p := range pending {
			r.Details = append(r.Details, p.String())
		}
		r.Fix = []string{"clear what holds them (a frozen or unkillable process, a process using the system's mounts); the shim retries (every second in the emulation, every 5 s with HCS) for ten minutes; after that its delete or winproc doctor -fix (once the shim has exited) removes them"}
	}
	d.add(r)
}
