package hcs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
	"github.com/winproc/winproc/shim/scratch"
)

func createSettings() *compute.Settings {
	return &compute.Settings{
		Layers: compute.Layers{
			Scratch: `C:\snapshots\9`,
			Parents: []string{`C:\snapshots\8`, `C:\snapshots\1`},
		},
		HostName:          "h",
		Network:           compute.Network{Namespace: "NS"},
		MappedDirectories: []compute.MappedDirectory{{HostPath: `C:\data`, ContainerPath: `C:\data`}},
	}
}

func TestCreate(t *testing.T) {
	b, a := testBackend(t)
	sys, err := b.Create(context.Background(), "ctr", createSettings())
	if err != nil {
		t.Fatal(err)
	}
	if sys.ID() != "ctr" {
		t.Errorf("ID = %q", sys.ID())
	}
	want := []string{
		"open ctr",
		"layerID 8",
		"layerID 1",
		`resolve C:\data`,
		`activate C:\snapshots\9`,
		`prepare C:\snapshots\9 C:\snapshots\8 C:\snapshots\1`,
		`mountPath C:\snapshots\9`,
		"createOperation",
		"create ctr",
	}
	if got := a.callList(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	c := a.created[0].Container
	if c.Storage.Path != `\\?\Volume{11111111-2222-3333-4444-555555555555}\` {
		t.Errorf("Storage.Path = %q", c.Storage.Path)
	}
	if want := []schema2.Layer{{Id: "guid-of-8", Path: `C:\snapshots\8`}, {Id: "guid-of-1", Path: `C:\snapshots\1`}}; !reflect.DeepEqual(c.Storage.Layers, want) {
		t.Errorf("Layers = %v", c.Storage.Layers)
	}
	if c.Networking == nil || c.Networking.Namespace != "NS" {
		t.Errorf("Networking = %+v", c.Networking)
	}
	if len(c.MappedDirectories) != 1 || c.MappedDirectories[0].HostPath != `\\?\resolved\C:\data` {
		t.Errorf("MappedDirectories = %+v, want the resolved host path", c.MappedDirectories)
	}
	if c.GuestOs.HostName != "h" || a.created[0].Owner != "winproc" || !a.created[0].ShouldTerminateOnLastHandleClosed {
		t.Errorf("document %+v", a.created[0])
	}
	rec, err := b.records.read("ctr")
	if err != nil || rec == nil || rec.Scratch != `C:\snapshots\9` || rec.CredentialGuard {
		t.Errorf("record = %+v, %v", rec, err)
	}
}

// A gMSA container gets its Container Credential Guard instance before
// the system is created; the instance goes when the stopped system is
// closed.
func TestCreateCredentialGuard(t *testing.T) {
	b, a := testBackend(t)
	s := createSettings()
	s.CredentialSpec = `{"CmsPlugins":["ActiveDirectory"]}`
	sys, err := b.Create(context.Background(), "ctr", s)
	if err != nil {
		t.Fatal(err)
	}
	ccg := a.created[0].Container.ContainerCredentialGuard
	if ccg == nil || ccg.Cookie != "cookie-ctr" || ccg.CredentialSpec != s.CredentialSpec {
		t.Errorf("ContainerCredentialGuard = %+v", ccg)
	}
	if rec, _ := b.records.read("ctr"); rec == nil || !rec.CredentialGuard {
		t.Errorf("record = %+v", rec)
	}
	if err := sys.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, sys.Wait(), "stop")
	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	if len(a.ccg) != 0 {
		t.Errorf("instances left: %v", a.ccg)
	}
	if rec, _ := b.records.read("ctr"); rec != nil {
		t.Errorf("record left: %+v", rec)
	}
}

// Processor affinity pins the silo's job object after the system is
// created, before it starts, as runhcs.
func TestCreateAffinity(t *testing.T) {
	b, a := testBackend(t)
	s := createSettings()
	s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 0x3, Group: 0}, {Mask: 0x10, Group: 1}}
	if _, err := b.Create(context.Background(), "ctr", s); err != nil {
		t.Fatal(err)
	}
	calls := a.callList()
	if last := calls[len(calls)-1]; last != "affinity ctr 0:0x3 1:0x10" {
		t.Errorf("calls %q, want the affinity set last", calls)
	}

	// A failed pin undoes the whole creation.
	b, a = testBackend(t)
	a.failNext("affinity", syscall.Errno(5))
	if _, err := b.Create(context.Background(), "ctr", s); !errdefs.IsPermissionDenied(err) {
		t.Fatalf("Create = %v", err)
	}
	if got, want := a.layerCalls(), []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}; !reflect.DeepEqual(got, want) {
		t.Errorf("layer calls %q, want %q", got, want)
	}
	if rec, _ := b.records.read("ctr"); rec != nil {
		t.Errorf("record left: %+v", rec)
	}
}

// A sandbox size grows the scratch before it is activated.
func TestCreateSandboxSize(t *testing.T) {
	b, a := testBackend(t)
	s := createSettings()
	s.SandboxSizeBytes = 40 << 30
	if _, err := b.Create(context.Background(), "ctr", s); err != nil {
		t.Fatal(err)
	}
	if got, want := a.layerCalls(), []string{"expand", "activate", "prepare", "mountPath"}; !reflect.DeepEqual(got, want) {
		t.Errorf("layer calls %q, want %q", got, want)
	}
}

func TestCreateRefusesBeforeTouchingLayers(t *testing.T) {
	cases := []struct {
		name   string
		id     string
		setup  func(*fakeAPI, *compute.Settings)
		class  func(error) bool
		called []string
	}{
		{"bad id", `a\b`, func(*fakeAPI, *compute.Settings) {}, errdefs.IsInvalidArgument, nil},
		// The translation refuses a spec without layers; the document
		// refuses settings without them.
		{"no layers", "c", func(_ *fakeAPI, s *compute.Settings) { s.Layers.Parents = nil }, errdefs.IsInvalidArgument, []string{"open c", `resolve C:\data`}},
		{"affinity in two groups before Windows Server 2022", "c", func(a *fakeAPI, s *compute.Settings) {
			a.build = 17763
			s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 1}, {Mask: 1, Group: 1}}
		}, errdefs.IsNotImplemented, nil},
		{"host before 1809", "c", func(a *fakeAPI, _ *compute.Settings) { a.build = 17134 }, errdefs.IsNotImplemented, nil},
		{"existing system", "c", func(a *fakeAPI, _ *compute.Settings) { a.existing["c"] = newFakeSystem(a.hcs, "c") },
			errdefs.IsAlreadyExists, []string{"open c", "createOperation", "properties c", "close c"}},
		{"HCS unreachable", "c", func(a *fakeAPI, _ *compute.Settings) { a.failNext("open", syscall.Errno(1722)) },
			errdefs.IsUnavailable, []string{"open c"}},
		{"no computecore.dll", "c", func(a *fakeAPI, _ *compute.Settings) { a.failNext("open", syscall.Errno(126)) },
			errdefs.IsUnavailable, []string{"open c"}},
		{"layer id fails", "c", func(a *fakeAPI, _ *compute.Settings) {
			a.failNext("layerID", errors.New("NameToGuid failed"))
		}, func(err error) bool { return err != nil }, []string{"open c", "layerID 8"}},
		{"mount source missing", "c", func(a *fakeAPI, _ *compute.Settings) {
			a.failNext("resolve", syscall.Errno(2))
		}, func(err error) bool { return errors.Is(err, syscall.Errno(2)) }, []string{"open c", "layerID 8", "layerID 1", `resolve C:\data`}},
		{"endpoint list", "c", func(_ *fakeAPI, s *compute.Settings) { s.Network.Endpoints = []string{"ep"} },
			errdefs.IsNotImplemented, []string{"open c", "layerID 8", "layerID 1", `resolve C:\data`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, a := testBackend(t)
			s := createSettings()
			tc.setup(a, s)
			_, err := b.Create(context.Background(), tc.id, s)
			if err == nil || !tc.class(err) {
				t.Fatalf("Create = %v", err)
			}
			if got := a.callList(); !reflect.DeepEqual(got, tc.called) {
				t.Errorf("calls %q, want %q", got, tc.called)
			}
			if rec, _ := b.records.read("c"); rec != nil {
				t.Errorf("a record was left: %+v", rec)
			}
		})
	}
}

// TestCreateUndo fails each step after the layers are touched and checks
// that what was done is undone in reverse order.
func TestCreateUndo(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		failing string
		err     error
		layers  []string
		class   func(error) bool
	}{
		{"activate", boom, []string{"activate"}, nil},
		{"prepare", boom, []string{"activate", "prepare", "deactivate"}, nil},
		{"mountPath", boom, []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}, nil},
		{"create", boom, []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}, nil},
		{"create", syscall.Errno(0x8037010F), []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}, errdefs.IsAlreadyExists},
		{"create", syscall.Errno(0x80370101), []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}, errdefs.IsFailedPrecondition},
		{"createOperation", boom, []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}, nil},
		{"activate", syscall.Errno(5), []string{"activate"}, errdefs.IsPermissionDenied},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %v", tc.failing, tc.err), func(t *testing.T) {
			b, a := testBackend(t)
			a.failNext(tc.failing, tc.err)
			_, err := b.Create(context.Background(), "c", createSettings())
			if tc.failing == "create" {
				// And the same failure reported by the operation.
				if !errors.Is(err, tc.err) {
					t.Fatalf("Create = %v, want it to wrap %v", err, tc.err)
				}
				b, a = testBackend(t)
				a.failOperation(tc.failing, tc.err)
				_, err = b.Create(context.Background(), "c", createSettings())
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("Create = %v, want it to wrap %v", err, tc.err)
			}
			if tc.class != nil && !tc.class(err) {
				t.Errorf("%v is not of the expected class", err)
			}
			if got := a.layerCalls(); !reflect.DeepEqual(got, tc.layers) {
				t.Errorf("layer calls %q, want %q", got, tc.layers)
			}
			if rec, _ := b.records.read("c"); rec != nil {
				t.Errorf("a record was left: %+v", rec)
			}
		})
	}
}

func TestCreateEmptyVolume(t *testing.T) {
	b, a := testBackend(t)
	a.mountPath = ""
	_, err := b.Create(context.Background(), "c", createSettings())
	if !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Create = %v", err)
	}
	if got, want := a.layerCalls(), []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}; !reflect.DeepEqual(got, want) {
		t.Errorf("layer calls %q, want %q", got, want)
	}
}

func TestCreateRetriesLayerNotReady(t *testing.T) {
	b, a := testBackend(t)
	a.failNext("activate", syscall.Errno(21))
	a.failNext("prepare", syscall.Errno(1167))
	if _, err := b.Create(context.Background(), "c", createSettings()); err != nil {
		t.Fatal(err)
	}
	want := []string{"activate", "activate", "prepare", "deactivate", "activate", "prepare", "mountPath"}
	if got := a.layerCalls(); !reflect.DeepEqual(got, want) {
		t.Errorf("layer calls %q, want %q", got, want)
	}

	b, a = testBackend(t)
	for range scratch.Attempts {
		a.failNext("activate", syscall.Errno(21))
	}
	_, err := b.Create(context.Background(), "c", createSettings())
	if !errors.Is(err, syscall.Errno(21)) {
		t.Fatalf("Create = %v", err)
	}
	if n := len(a.layerCalls()); n != scratch.Attempts {
		t.Errorf("%d activations, want %d", n, scratch.Attempts)
	}
}

func TestCreateCanceled(t *testing.T) {
	b, a := testBackend(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Create(ctx, "c", createSettings()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create = %v", err)
	}
	if calls := a.callList(); len(calls) != 0 {
		t.Errorf("calls %q", calls)
	}
}

func TestCreateReleasesStaleRecord(t *testing.T) {
	b, a := testBackend(t)
	if err := b.records.write(record{ID: "c", Scratch: `C:\old`}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(context.Background(), "c", createSettings()); err != nil {
		t.Fatal(err)
	}
	calls := a.callList()
	want := []string{`unprepare C:\old`, `deactivate C:\old`, `activate C:\snapshots\9`}
	if !reflect.DeepEqual(calls[4:7], want) {
		t.Errorf("calls %q, want the stale scratch released before activation: %q", calls, want)
	}
	if rec, _ := b.records.read("c"); rec == nil || rec.Scratch != `C:\snapshots\9` {
		t.Errorf("record = %+v", rec)
	}
}

// HostCPUs counts the processors of every processor group, as runhcs
// (hcsshim internal/processorinfo, ProcessorCount): Go's runtime.NumCPU sees
// one group, at most 64. A failed count (0) falls back to runtime.NumCPU.
func TestHostCPUs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		active uint32
		want   int
	}{
		{"two processor groups", 128, 128},
		{"one group", 8, 8},
		{"count failed", 0, runtime.NumCPU()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, a := testBackend(t)
			a.processors = tc.active
			if got := b.HostCPUs(); got != tc.want {
				t.Errorf("HostCPUs = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNewOptions(t *testing.T) {
	b := newBackend(newFakeAPI(), Options{})
	if b.drain != DefaultDrainTimeout || b.records.dir != "" {
		t.Errorf("defaults: %+v", b)
	}
}
