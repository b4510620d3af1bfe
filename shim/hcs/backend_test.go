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
)

func createSettings() *compute.Settings {
	return &compute.Settings{
		Layers: compute.Layers{
			Scratch: `C:\snapshots\9`,
			Parents: []string{`C:\snapshots\8`, `C:\snapshots\1`},
		},
		HostName: "h",
		Network:  compute.Network{Namespace: "NS", Endpoints: []string{"ep-explicit"}},
	}
}

func TestCreate(t *testing.T) {
	b, a := testBackend(t)
	a.namespaces["NS"] = []string{"ep-ns-1", "EP-EXPLICIT"}
	sys, err := b.Create(context.Background(), "ctr", createSettings())
	if err != nil {
		t.Fatal(err)
	}
	if sys.ID() != "ctr" {
		t.Errorf("ID = %q", sys.ID())
	}
	want := []string{
		"open ctr",
		"namespace NS",
		"layerID 8",
		"layerID 1",
		`activate C:\snapshots\9`,
		`prepare C:\snapshots\9 C:\snapshots\8 C:\snapshots\1`,
		`mountPath C:\snapshots\9`,
		"create ctr",
	}
	if got := a.callList(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	c := a.created[0]
	if c.VolumePath != `\\?\Volume{11111111-2222-3333-4444-555555555555}` {
		t.Errorf("VolumePath = %q", c.VolumePath)
	}
	if c.LayerFolderPath != `C:\snapshots\9` {
		t.Errorf("LayerFolderPath = %q", c.LayerFolderPath)
	}
	if want := []layerRef{{ID: "guid-of-8", Path: `C:\snapshots\8`}, {ID: "guid-of-1", Path: `C:\snapshots\1`}}; !reflect.DeepEqual(c.Layers, want) {
		t.Errorf("Layers = %v", c.Layers)
	}
	if want := []string{"ep-explicit", "ep-ns-1"}; !reflect.DeepEqual(c.EndpointList, want) {
		t.Errorf("EndpointList = %v", c.EndpointList)
	}
	if c.HostName != "h" || c.Name != "ctr" || c.Owner != "winproc" {
		t.Errorf("document %+v", c)
	}
	rec, err := b.records.read("ctr")
	if err != nil || rec == nil || rec.Scratch != `C:\snapshots\9` {
		t.Errorf("record = %+v, %v", rec, err)
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
		{"no layers", "c", func(_ *fakeAPI, s *compute.Settings) { s.Layers.Parents = nil }, errdefs.IsInvalidArgument, nil},
		{"affinity", "c", func(_ *fakeAPI, s *compute.Settings) {
			s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 1}}
		}, errdefs.IsNotImplemented, nil},
		{"existing system", "c", func(a *fakeAPI, _ *compute.Settings) { a.existing["c"] = newFakeContainer(a, "c") },
			errdefs.IsAlreadyExists, []string{"open c", "close c"}},
		{"HCS unreachable", "c", func(a *fakeAPI, _ *compute.Settings) { a.failNext("open", syscall.Errno(1722)) },
			errdefs.IsUnavailable, []string{"open c"}},
		{"namespace missing", "c", func(*fakeAPI, *compute.Settings) {}, errdefs.IsNotFound, []string{"open c", "namespace NS"}},
		{"layer id fails", "c", func(a *fakeAPI, _ *compute.Settings) {
			a.namespaces["NS"] = nil
			a.failNext("layerID", errors.New("NameToGuid failed"))
		}, func(err error) bool { return err != nil }, []string{"open c", "namespace NS", "layerID 8"}},
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
		{"activate", syscall.Errno(5), []string{"activate"}, errdefs.IsPermissionDenied},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %v", tc.failing, tc.err), func(t *testing.T) {
			b, a := testBackend(t)
			a.namespaces["NS"] = nil
			a.failNext(tc.failing, tc.err)
			_, err := b.Create(context.Background(), "c", createSettings())
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
	a.namespaces["NS"] = nil
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
	a.namespaces["NS"] = nil
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
	a.namespaces["NS"] = nil
	for range layerAttempts {
		a.failNext("activate", syscall.Errno(21))
	}
	_, err := b.Create(context.Background(), "c", createSettings())
	if !errors.Is(err, syscall.Errno(21)) {
		t.Fatalf("Create = %v", err)
	}
	if n := len(a.layerCalls()); n != layerAttempts {
		t.Errorf("%d activations, want %d", n, layerAttempts)
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
	a.namespaces["NS"] = nil
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

// TestCreatePodNetwork checks the schema-v1 documents of a pod: the
// sandbox container takes the namespace's endpoints, the pod's other
// containers share its network stack instead of attaching the same
// endpoints again.
func TestCreatePodNetwork(t *testing.T) {
	tests := []struct {
		name          string
		network       compute.Network
		wantEndpoints []string
		wantShared    string
	}{
		{"pod sandbox", compute.Network{Namespace: "NS", PodSandbox: "pod1", IsPodSandbox: true}, []string{"ep-ns-1"}, ""},
		{"pod app container", compute.Network{Namespace: "NS", PodSandbox: "pod1"}, nil, "pod1"},
		{"outside a pod", compute.Network{Namespace: "NS"}, []string{"ep-ns-1"}, ""},
		{"shared container named by the spec", compute.Network{Namespace: "NS", PodSandbox: "pod1", SharedContainerName: "other"}, []string{"ep-ns-1"}, "other"},
		{"host-network pod", compute.Network{PodSandbox: "pod1"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, a := testBackend(t)
			a.namespaces["NS"] = []string{"ep-ns-1"}
			s := createSettings()
			s.Network = tt.network
			if _, err := b.Create(context.Background(), "ctr", s); err != nil {
				t.Fatal(err)
			}
			c := a.created[0]
			if !reflect.DeepEqual(c.EndpointList, tt.wantEndpoints) || c.NetworkSharedContainerName != tt.wantShared {
				t.Errorf("EndpointList %q, NetworkSharedContainerName %q; want %q, %q", c.EndpointList, c.NetworkSharedContainerName, tt.wantEndpoints, tt.wantShared)
			}
			if !reflect.DeepEqual(s.Network, tt.network) {
				t.Errorf("Create changed the caller's settings: %+v", s.Network)
			}
		})
	}
}
