package doctor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeLeftovers is the compute backend's side of the orphans check.
type fakeLeftovers struct {
	orphans []Orphan
	findErr error
	// failRemove fails the removal of these IDs.
	failRemove map[string]bool
	// state and tasks are what Find was asked with: the state directory,
	// and containerd's tasks of namespace k8s.io (nil when it did not
	// answer).
	state   string
	tasks   []string
	removed []string
}

func (f *fakeLeftovers) Where(state string) string { return "under " + state }

func (f *fakeLeftovers) Find(_ context.Context, state string, tasks func(string) ([]string, error)) ([]Orphan, error) {
	f.state = state
	f.tasks, _ = tasks("k8s.io")
	return f.orphans, f.findErr
}

func (f *fakeLeftovers) Remove(ctx context.Context, _ string, o Orphan) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("removed without a deadline")
	}
	if f.failRemove[o.ID] {
		return errors.New("still mounted")
	}
	f.removed = append(f.removed, o.ID)
	return nil
}

func TestOrphans(t *testing.T) {
	two := []Orphan{
		{Namespace: "k8s.io", ID: "pod1", Dir: "/run/containerd/winproc-emulation/k8s.io/pod1", Why: "its shim (pid 7) is gone", Mounts: []string{"/a", "/b"}, Cgroup: "/sys/fs/cgroup/x", Processes: []string{"8 wineserver"}},
		{Namespace: "k8s.io", ID: ".hostprocess", Dir: "/run/containerd/winproc-emulation/k8s.io/.hostprocess", Why: "no HostProcess container uses it"},
	}
	tests := []struct {
		name        string
		change      func(s *fakeSystem, o *Options)
		status      Status
		summary     string
		details     []string // each held by some detail line
		fix         string
		removed     []string
		released    []string // pause rootfs
		state       string
		tasksAnswer bool
	}{
		{name: "none", status: OK, summary: "none under /run/containerd", state: "/run/containerd", tasksAnswer: true},
		{name: "listed", change: func(s *fakeSystem, _ *Options) { s.leftovers.orphans = two },
			status: Fail, summary: "2 compute systems left behind",
			details: []string{"k8s.io/pod1 (its shim (pid 7) is gone): 1 processes (8 wineserver), 2 mounts, cgroup /sys/fs/cgroup/x", "k8s.io/.hostprocess"},
			fix:     "winproc doctor -fix", state: "/run/containerd", tasksAnswer: true},
		{name: "removed", change: func(s *fakeSystem, o *Options) { s.leftovers.orphans, o.Fix = two, true },
			status: OK, summary: "removed 2 compute systems", details: []string{"removed k8s.io/pod1", "removed k8s.io/.hostprocess"},
			removed: []string{"pod1", ".hostprocess"}, state: "/run/containerd", tasksAnswer: true},
		{name: "one not removed", change: func(s *fakeSystem, o *Options) {
			s.leftovers.orphans, o.Fix, s.leftovers.failRemove = two, true, map[string]bool{"pod1": true}
		},
			status: Fail, summary: "1 of 2 compute systems left behind could not be removed: k8s.io/pod1: still mounted",
			details: []string{"removed k8s.io/.hostprocess"}, fix: "winproc doctor -fix again", removed: []string{".hostprocess"}, state: "/run/containerd", tasksAnswer: true},
		{name: "a stale pause rootfs", change: func(s *fakeSystem, _ *Options) {
			s.cd.pauseRootfs = []PauseRootfs{{Namespace: "k8s.io", Sandbox: "gone"}, {Namespace: "k8s.io", Sandbox: "pod2", SandboxKnown: true}}
		},
			status: Fail, summary: "1 compute systems left behind",
			details: []string{"k8s.io/gone (containerd has no sandbox gone): pause rootfs snapshot winproc-sandbox-gone"},
			fix:     "winproc doctor -fix", state: "/run/containerd", tasksAnswer: true},
		{name: "a stale pause rootfs released", change: func(s *fakeSystem, o *Options) {
			s.cd.pauseRootfs, o.Fix = []PauseRootfs{{Namespace: "k8s.io", Sandbox: "gone"}, {Namespace: "k8s.io", Sandbox: "pod2", SandboxKnown: true}}, true
		},
			status: OK, summary: "removed 1 compute systems", details: []string{"removed k8s.io/gone"},
			released: []string{"k8s.io/gone"}, state: "/run/containerd", tasksAnswer: true},
		{name: "cannot look", change: func(s *fakeSystem, _ *Options) { s.leftovers.findErr = errors.New("permission denied") },
			status: Warn, summary: "cannot look for orphans under /run/containerd: permission denied", state: "/run/containerd", tasksAnswer: true},
		{name: "containerd down: Find is told", change: func(s *fakeSystem, _ *Options) { s.cd.down = true },
			status: OK, state: "/run/containerd"},
		{name: "the config's state directory", change: func(s *fakeSystem, o *Options) {
			s.files[o.ConfigPath] = "state = \"/srv/containerd-state\"\n" + s.files[o.ConfigPath]
		},
			status: OK, summary: "none under /srv/containerd-state", state: "/srv/containerd-state", tasksAnswer: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys, o := healthy(t)
			sys.leftovers = &fakeLeftovers{}
			sys.cd.tasks = map[string][]string{"k8s.io": {"pod2"}}
			if tc.change != nil {
				tc.change(sys, &o)
			}
			r := Run(context.Background(), o).Check(CheckOrphans)
			if r == nil {
				t.Fatal("no orphans check")
			}
			if r.Status != tc.status || !strings.Contains(r.Summary, tc.summary) {
				t.Errorf("%s %q, want %s with %q", r.Status, r.Summary, tc.status, tc.summary)
			}
			for _, want := range tc.details {
				if !slices.ContainsFunc(r.Details, func(d string) bool { return strings.Contains(d, want) }) {
					t.Errorf("details %q lack %q", r.Details, want)
				}
			}
			if fix := strings.Join(r.Fix, "\n"); tc.fix != "" && !strings.Contains(fix, tc.fix) || tc.fix == "" && fix != "" {
				t.Errorf("fix %q, want %q", fix, tc.fix)
			}
			lo := sys.leftovers
			if !slices.Equal(lo.removed, tc.removed) {
				t.Errorf("removed %v, want %v", lo.removed, tc.removed)
			}
			if !slices.Equal(sys.cd.released, tc.released) {
				t.Errorf("pause rootfs released %v, want %v", sys.cd.released, tc.released)
			}
			if lo.state != tc.state {
				t.Errorf("looked under %q, want %q", lo.state, tc.state)
			}
			if got := lo.tasks != nil; got != tc.tasksAnswer {
				t.Errorf("Find had containerd's tasks: %v, want %v", got, tc.tasksAnswer)
			}
		})
	}
}

// Without a Leftovers (a node with no compute backend of winproc's) the
// check does not run.
func TestOrphansNotRunWithoutLeftovers(t *testing.T) {
	_, o := healthy(t)
	if r := Run(context.Background(), o).Check(CheckOrphans); r != nil {
		t.Errorf("orphans check ran: %+v", r)
	}
}
