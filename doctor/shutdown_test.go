package doctor

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/containerd/errdefs"
)

// fakeServices is a Windows node's service manager and registry: the
// services' dependencies by name (a missing name is no service) and the
// PreshutdownOrder value.
type fakeServices struct {
	deps     map[string][]string
	order    []string
	depsErr  error
	orderErr error
}

func (f *fakeServices) Dependencies(name string) ([]string, error) {
	if f.depsErr != nil {
		return nil, f.depsErr
	}
	for n, d := range f.deps {
		if strings.EqualFold(n, name) {
			return d, nil
		}
	}
	return nil, fmt.Errorf("service %s: %w", name, errdefs.ErrNotFound)
}

func (f *fakeServices) PreshutdownOrder() ([]string, error) { return f.order, f.orderErr }

// A node installed as install.ps1 does, after the kubelet started.
func orderedNode() *fakeServices {
	return &fakeServices{
		deps: map[string][]string{
			"winproc-snapshotter": nil,
			"containerd":          {"winproc-snapshotter"},
			"kubelet":             {"containerd"},
		},
		order: []string{"kubelet", "containerd"},
	}
}

func TestCheckShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(f *fakeServices)
		status  Status
		summary string
		fix     []string
	}{
		{"in order", func(*fakeServices) {}, OK, "kubelet depends on containerd, containerd on winproc-snapshotter", nil},
		{"names in another case, and an earlier entry of the order", func(f *fakeServices) {
			f.deps["kubelet"] = []string{"Containerd"}
			f.order = []string{"vmms", "KUBELET", "containerd"}
		}, OK, "kubelet depends on Containerd", nil},
		{"containerd is no service", func(f *fakeServices) { delete(f.deps, "containerd") },
			OK, "not checked: containerd does not run as a Windows service here", nil},
		{"no kubelet service", func(f *fakeServices) { delete(f.deps, "kubelet") },
			OK, "containerd depends on winproc-snapshotter; no kubelet service", nil},
		{"containerd does not depend on the snapshotter: the fix keeps its services and groups", func(f *fakeServices) {
			f.deps["containerd"] = []string{"+NetworkProvider", "hns"}
		}, Warn, "containerd does not depend on winproc-snapshotter", []string{"sc.exe config containerd depend= +NetworkProvider/hns/winproc-snapshotter"}},
		{"the snapshotter is a startup task", func(f *fakeServices) {
			delete(f.deps, "winproc-snapshotter")
			f.deps["containerd"] = nil
		}, Warn, "winproc-snapshotter is not a service", []string{"run it as a service: rerun install.ps1 without -SnapshotterAsTask (it also makes containerd depend on winproc-snapshotter)"}},
		{"the kubelet does not depend on containerd: the fix keeps its own", func(f *fakeServices) {
			f.deps["kubelet"] = []string{"docker"}
			f.order = []string{"kubelet", "docker"}
		}, Warn, "the kubelet does not depend on containerd", []string{"sc.exe config kubelet depend= docker/containerd", "Restart-Service kubelet (it writes PreshutdownOrder when it starts)"}},
		{"graceful node shutdown is off", func(f *fakeServices) { f.order = nil },
			Warn, `graceful node shutdown is off: the kubelet is not in HKLM\SYSTEM\CurrentControlSet\Control\PreshutdownOrder (nothing)`, nil},
		{"the kubelet started before it depended on containerd", func(f *fakeServices) {
			f.order = []string{"containerd", "kubelet"}
		}, Warn, "does not list the kubelet before containerd", []string{"Restart-Service kubelet (it writes PreshutdownOrder when it starts)"}},
		{"the kubelet started before it depended on containerd: containerd not in the order", func(f *fakeServices) {
			f.order = []string{"kubelet"}
		}, Warn, "does not list the kubelet before containerd", nil},
		{"the service manager refuses", func(f *fakeServices) { f.depsErr = errors.New("Access is denied.") },
			Warn, "cannot read the containerd service's dependencies: Access is denied.", []string{"run winproc doctor as an administrator (sc.exe qc containerd shows them)"}},
		{"the registry refuses", func(f *fakeServices) { f.orderErr = errors.New("Access is denied.") },
			Warn, `cannot read HKLM\SYSTEM\CurrentControlSet\Control\PreshutdownOrder: Access is denied.`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := orderedNode()
			tc.change(f)
			r := shutdownResult(f)
			if r.Name != CheckShutdown || r.Status != tc.status || !strings.Contains(r.Summary, tc.summary) {
				t.Errorf("got %s %s %q, want %s with %q (details %q)", r.Name, r.Status, r.Summary, tc.status, tc.summary, r.Details)
			}
			if tc.status != OK && len(r.Fix) == 0 {
				t.Errorf("%s without a fix", r.Status)
			}
			for _, want := range tc.fix {
				if !slices.Contains(r.Fix, want) {
					t.Errorf("fix %q lacks %q", r.Fix, want)
				}
			}
		})
	}
}

// The kubelet's own placement (addToExistingOrder in kubernetes
// nodeshutdown_manager_windows.go: its dependencies appended to the order
// when absent, itself inserted before the first of them) gives an order
// the check accepts, whatever the order held before.
func TestCheckShutdownAcceptsTheKubeletsPlacement(t *testing.T) {
	for _, before := range [][]string{nil, {"containerd"}, {"containerd", "kubelet"}, {"a", "containerd", "kubelet", "b"}} {
		f := orderedNode()
		f.deps["kubelet"] = []string{"hns", "containerd"}
		f.order = kubeletPlacement(f.deps["kubelet"], before)
		if r := shutdownResult(f); r.Status != OK {
			t.Errorf("order %v (from %v): %s %q", f.order, before, r.Status, r.Summary)
		}
	}
}

// kubeletPlacement is the kubelet's rule as its comment and code state it,
// written out here as the check's oracle.
func kubeletPlacement(deps, existing []string) []string {
	var order []string
	for _, s := range existing {
		if !strings.EqualFold(s, kubeletService) {
			order = append(order, s)
		}
	}
	for _, d := range deps {
		if !slices.Contains(order, d) {
			order = append(order, d)
		}
	}
	if i := slices.IndexFunc(order, func(s string) bool { return slices.Contains(deps, s) }); i >= 0 {
		order = slices.Insert(order, i, kubeletService)
	}
	return order
}

// On a node without a service manager (the emulation) the check says it
// did not run, and is no warning.
func TestCheckShutdownWithoutServices(t *testing.T) {
	sys, o := healthy(t)
	r := Run(t.Context(), o).Check(CheckShutdown)
	if r == nil || r.Status != OK || !strings.HasPrefix(r.Summary, "not checked: this node has no Windows service manager") {
		t.Fatalf("node shutdown: %+v", r)
	}
	sys.services = orderedNode()
	sys.services.order = nil
	if r := Run(t.Context(), o).Check(CheckShutdown); r == nil || r.Status != Warn {
		t.Fatalf("node shutdown with the kubelet out of the order: %+v", r)
	}
}

// servicesUnderWineEnv, set to 1, lets TestServicesUnderWine create
// services and write the registry: TestServicesAdapterUnderWine sets it in
// a private Wine prefix of its own.
const servicesUnderWineEnv = "WINPROC_DOCTOR_SERVICES_PREFIX"

func TestSplitMultiSZ(t *testing.T) {
	enc := func(s string) []uint16 { return utf16.Encode([]rune(s)) }
	for _, tc := range []struct {
		in   []uint16
		want []string
	}{
		{nil, nil},
		{enc("\x00"), nil},
		{enc("containerd\x00\x00"), []string{"containerd"}},
		{enc("hns\x00+NetworkProvider\x00winproc-snapshotter\x00\x00junk"), []string{"hns", "+NetworkProvider", "winproc-snapshotter"}},
		{enc("Ünïcode\x00\x00"), []string{"Ünïcode"}},
		{enc("cut\x00short"), []string{"cut", "short"}},
	} {
		if got := splitMultiSZ(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitMultiSZ(%q) = %q, want %q", string(utf16.Decode(tc.in)), got, tc.want)
		}
	}
}
