//go:build windows

package doctor

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
	"golang.org/x/sys/windows/svc/mgr"
)

// TestServicesUnderWine reads, through the Windows adapter, services that
// it registers with the service manager and a PreshutdownOrder it writes
// to the registry: a service that does not exist, the value present and
// absent, and (on Windows; Wine returns none) the dependencies as
// QueryServiceConfig returns them, with the check run on them.
func TestServicesUnderWine(t *testing.T) {
	if os.Getenv(servicesUnderWineEnv) != "1" {
		t.Skipf("%s is unset: TestServicesAdapterUnderWine runs this in a private Wine prefix (it registers services)", servicesUnderWineEnv)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m, err := mgr.Connect()
	if err != nil {
		t.Fatalf("connect to the service manager: %v", err)
	}
	t.Cleanup(func() { m.Disconnect() })
	create := func(name string, deps ...string) *mgr.Service {
		s, err := m.CreateService(name, exe, mgr.Config{StartType: mgr.StartManual, Dependencies: deps})
		if err != nil {
			t.Fatalf("create service %s: %v", name, err)
		}
		t.Cleanup(func() {
			if err := s.Delete(); err != nil {
				t.Errorf("delete service %s: %v", name, err)
			}
			s.Close()
		})
		return s
	}
	create(snapshotterService)
	create(containerdService, "hns-standin", snapshotterService)
	kubelet := create(kubeletService, containerdService)

	k, _, err := registry.CreateKey(registry.LOCAL_MACHINE, `SYSTEM\CurrentControlSet\Control`, registry.SET_VALUE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	setOrder := func(order ...string) {
		if err := k.SetStringsValue("PreshutdownOrder", order); err != nil {
			t.Fatalf("set PreshutdownOrder: %v", err)
		}
	}

	var s Services = winServices{}
	if _, err := s.Dependencies("winproc-no-such-service"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a service that does not exist: %v, want not found", err)
	}
	if err := k.DeleteValue("PreshutdownOrder"); err != nil && !errors.Is(err, registry.ErrNotExist) {
		t.Fatal(err)
	}
	if got, err := s.PreshutdownOrder(); len(got) != 0 || err != nil {
		t.Errorf("no PreshutdownOrder value: %q, %v", got, err)
	}
	setOrder("vmms", kubeletService, containerdService)
	if got, err := s.PreshutdownOrder(); err != nil || !slices.Equal(got, []string{"vmms", kubeletService, containerdService}) {
		t.Errorf("PreshutdownOrder = %q, %v", got, err)
	}

	cdDeps, err := s.Dependencies(containerdService)
	if err != nil {
		t.Fatalf("containerd's dependencies: %v", err)
	}
	if _, err := s.Dependencies(strings.ToUpper(kubeletService)); err != nil {
		t.Fatalf("KUBELET's dependencies: %v", err)
	}
	if underWine() {
		// Wine 8's services.exe answers QueryServiceConfigW with no
		// lpDependencies (svcctl_QueryServiceConfigW: "TODO"), though it
		// keeps them where Windows does, in the service's DependOnService.
		if len(cdDeps) != 0 {
			t.Fatalf("Wine now returns lpDependencies %q: assert them as on Windows", cdDeps)
		}
		if got := registryDependencies(t, containerdService); !slices.Equal(got, []string{"hns-standin", snapshotterService}) {
			t.Errorf("containerd's DependOnService = %q", got)
		}
		t.Log("Wine returns no service dependencies: the check's decisions on them are proven against fakes only")
		return
	}
	if !slices.Equal(cdDeps, []string{"hns-standin", snapshotterService}) {
		t.Errorf("containerd's dependencies = %q", cdDeps)
	}
	if r := shutdownResult(s); r.Status != OK {
		t.Errorf("services in order: %s %q %q", r.Status, r.Summary, r.Details)
	}
	// The kubelet's dependency gone: the check says so, keeping the rest.
	// lpDependencies: NUL after each name, and after the last.
	deps := utf16.Encode([]rune("hns-standin\x00\x00"))
	if err := windows.ChangeServiceConfig(kubelet.Handle, windows.SERVICE_NO_CHANGE, windows.SERVICE_NO_CHANGE, windows.SERVICE_NO_CHANGE,
		nil, nil, nil, &deps[0], nil, nil, nil); err != nil {
		t.Fatalf("update the kubelet's dependencies: %v", err)
	}
	r := shutdownResult(s)
	if r.Status != Warn || !slices.Contains(r.Fix, "sc.exe config kubelet depend= hns-standin/containerd") {
		t.Errorf("the kubelet without containerd: %s %q, fix %q", r.Status, r.Summary, r.Fix)
	}
}

// registryDependencies reads the service's DependOnService value.
func registryDependencies(t *testing.T, name string) []string {
	t.Helper()
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SYSTEM\CurrentControlSet\Services\`+name, registry.QUERY_VALUE)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	v, _, err := k.GetStringsValue("DependOnService")
	if err != nil {
		t.Fatalf("%s's DependOnService: %v", name, err)
	}
	return v
}

func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}
