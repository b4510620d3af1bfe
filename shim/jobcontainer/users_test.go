package jobcontainer

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// Each user is logged on as runhcs does, SYSTEM with the shim's own token,
// and the token is kept for the user's later processes.
func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		inherit    bool
		calls      []string
		username   string
	}{
		{"SYSTEM", `NT AUTHORITY\SYSTEM`, false, []string{"processToken", "tokenUser"}, "shim"},
		{"inherit user", `NT AUTHORITY\NETWORK SERVICE`, true, []string{"processToken"}, "shim"},
		{"local service", `NT AUTHORITY\LOCAL SERVICE`, false, []string{`logonUser NT AUTHORITY\LOCAL SERVICE 5`}, `NT AUTHORITY\LOCAL SERVICE`},
		{"network service", `NT AUTHORITY\NetworkService`, false, []string{`logonUser NT AUTHORITY\NetworkService 5`}, `NT AUTHORITY\NetworkService`},
		{"local user", `agent`, false, []string{"localGroupExists agent", `logonUser \agent 2`}, `\agent`},
		{"domain user", `CORP\agent`, false, []string{`logonUser CORP\agent 2`}, `CORP\agent`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, f := testBackend(t)
			settings := hostProcessSettings()
			settings.HostProcess.InheritUser = tc.inherit
			sys, err := b.Create(context.Background(), "c1", settings)
			if err != nil {
				t.Fatal(err)
			}
			defer sys.Close()
			s := sys.(*system)
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			before := len(withoutWatch(f.callList()))
			for range 2 {
				tok, err := s.token(context.Background(), tc.user)
				if err != nil {
					t.Fatal(err)
				}
				f.mu.Lock()
				got := string(f.handles[tok].(fakeToken))
				f.mu.Unlock()
				if got != tc.username {
					t.Errorf("token of %q", got)
				}
			}
			if got := withoutWatch(f.callList())[before:]; !reflect.DeepEqual(got, tc.calls) {
				t.Errorf("calls %q, want %q (once)", got, tc.calls)
			}
		})
	}
}

// Each spelling of the service accounts the kubelet can pass
// (runAsUserName is passed on as the pod spec writes it; Kubernetes'
// documentation and e2e tests write "NT AUTHORITY\Local service") reaches
// LogonUserW as written, with a service logon, and the process starts.
func TestServiceAccountSpellings(t *testing.T) {
	for _, user := range []string{
		`NT AUTHORITY\Local service`,
		`NT AUTHORITY\LOCAL SERVICE`,
		`NT AUTHORITY\LocalService`,
		`nt authority\local service`,
		`NT AUTHORITY\Network Service`,
		`NT AUTHORITY\NETWORK SERVICE`,
		`NT AUTHORITY\NetworkService`,
	} {
		t.Run(user, func(t *testing.T) {
			_, f, s := startedSystem(t)
			p, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe exit 0", User: user})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			want := "logonUser " + user + " 5"
			if calls := strings.Join(f.callList(), "\n"); !strings.Contains(calls, want) {
				t.Errorf("no %q in\n%s", want, calls)
			}
		})
	}
}

func TestSystemTokenNotSystem(t *testing.T) {
	_, f, s := startedSystem(t)
	f.ownSID = "S-1-5-21-1-2-3-500"
	_, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe", User: `NT AUTHORITY\SYSTEM`})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "S-1-5-21-1-2-3-500") || !strings.Contains(err.Error(), "LocalSystem service") {
		t.Fatalf("CreateProcess = %v", err)
	}
	for _, h := range f.openHandles() {
		if strings.Contains(h, "fakeToken") {
			t.Errorf("token %s left open", h)
		}
	}
}

func TestNamedUserWithoutPassword(t *testing.T) {
	_, f, s := startedSystem(t)
	f.failNext("logonUser", errorLogonFailure)
	_, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe", User: `agent`})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "local group") {
		t.Fatalf("CreateProcess = %v", err)
	}
}

// A local group's processes run as a temporary user made in it: recorded
// before it is made, logged on with its password, deleted by Close.
func TestGroupUser(t *testing.T) {
	b, f, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe sleep", User: "Administrators"})
	name := tempUserName("c1", "Administrators")
	if len(name) > 20 || !strings.HasPrefix(name, "hpc-") {
		t.Errorf("user name %q", name)
	}
	calls := strings.Join(f.callList(), "\n")
	for _, want := range []string{"localGroupExists Administrators", "addUser " + name, "addGroupMember Administrators " + name, `logonUser .\` + name + " 2"} {
		if !strings.Contains(calls, want) {
			t.Errorf("no %q in\n%s", want, calls)
		}
	}
	if h, _ := b.held(t, "c1"); !reflect.DeepEqual(h.Users, []string{name}) {
		t.Errorf("record %+v", h)
	}
	if f.users[name] != "Administrators" {
		t.Errorf("users %v", f.users)
	}
	// A second process of the group reuses the user.
	run(t, s, &compute.ProcessSettings{CommandLine: "app.exe sleep", User: "administrators"})
	if n := strings.Count(strings.Join(f.callList(), "\n"), "addUser"); n != 1 {
		t.Errorf("%d users made", n)
	}
	p.Kill(context.Background())
	s.Terminate(context.Background())
	within(t, s.Wait(), "the stop")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(f.users) != 0 {
		t.Errorf("users left: %v", f.users)
	}
	if tempUserName("c1", "users") == tempUserName("c2", "users") || tempUserName("c1", "users") != tempUserName("c1", "Users") {
		t.Error("temporary user names are not one per container and group")
	}
}

func TestGroupUserFailures(t *testing.T) {
	for _, tc := range []struct {
		failing string
		class   func(error) bool
	}{
		{"addUser", errdefs.IsPermissionDenied},
		{"addGroupMember", errdefs.IsPermissionDenied},
		{"logonUser", errdefs.IsPermissionDenied},
	} {
		t.Run(tc.failing, func(t *testing.T) {
			b, f, s := startedSystem(t)
			f.failNext(tc.failing, errorAccessDenied)
			_, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe", User: "Users"})
			if !tc.class(err) || !strings.Contains(err.Error(), "hpc-") {
				t.Fatalf("CreateProcess = %v", err)
			}
			if len(f.users) != 0 {
				t.Errorf("users left: %v", f.users)
			}
			if h, _ := b.held(t, "c1"); len(h.Users) != 0 {
				t.Errorf("record %+v", h)
			}
		})
	}
	// A user of the name left by a dead shim is replaced.
	_, f, s := startedSystem(t)
	f.users[tempUserName("c1", "Users")] = "Users"
	if _, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe sleep", User: "Users"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(f.callList(), "\n"), "deleteUser "+tempUserName("c1", "Users")) {
		t.Error("the old user was not deleted")
	}
}
