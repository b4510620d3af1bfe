package main

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	nodev1 "k8s.io/api/node/v1"
	"sigs.k8s.io/yaml"

	"github.com/winproc/winproc/winbuild"
)

// decodeStream decodes each document of a YAML stream strictly as a
// RuntimeClass or a Deployment, by its kind.
func decodeStream(t *testing.T, y string) (rcs []nodev1.RuntimeClass, deps []appsv1.Deployment) {
	t.Helper()
	for _, doc := range strings.Split(y, "\n---\n") {
		var tm struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "node.k8s.io/v1 RuntimeClass":
			var rc nodev1.RuntimeClass
			if err := yaml.UnmarshalStrict([]byte(doc), &rc); err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			rcs = append(rcs, rc)
		case "apps/v1 Deployment":
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			deps = append(deps, d)
		default:
			t.Fatalf("unexpected document %q:\n%s", tm, doc)
		}
	}
	return rcs, deps
}

func withHostBuild(t *testing.T, v winbuild.Version, err error) {
	t.Helper()
	old := hostBuild
	hostBuild = func() (winbuild.Version, error) { return v, err }
	t.Cleanup(func() { hostBuild = old })
}

func TestRuntimeClass(t *testing.T) {
	withHostBuild(t, winbuild.Version{Major: 10, Minor: 0, Build: 26100, Revision: 4946}, nil)
	for _, tc := range []struct {
		name      string
		args      []string
		wantRCs   []string // names
		handler   string
		build     string // windows-build label of the first RuntimeClass
		wantImage string // the Deployment's, "" for none
	}{
		{"all LTSC", nil, []string{"winproc-ltsc2019", "winproc-ltsc2022", "winproc-ltsc2025"}, "winproc", "10.0.17763", ""},
		{"build", []string{"-build", "10.0.20348"}, []string{"winproc-ltsc2022"}, "winproc", "10.0.20348", ""},
		{"double-dash flags", []string{"--handler", "wp", "--build", "10.0.17763.5000"}, []string{"wp-ltsc2019"}, "wp", "10.0.17763", ""},
		{"unnamed build", []string{"-build=10.0.27000"}, []string{"winproc-27000"}, "winproc", "10.0.27000", ""},
		{"host", []string{"-host"}, []string{"winproc-ltsc2025"}, "winproc", "10.0.26100", ""},
		{"deployment", []string{"-build", "10.0.20348", "-deployment", "example.com/app:1"}, []string{"winproc-ltsc2022"}, "winproc", "10.0.20348", "example.com/app:1"},
		{"host deployment", []string{"--host", "--deployment", "example.com/app:2", "--handler", "winproc-2"}, []string{"winproc-2-ltsc2025"}, "winproc-2", "10.0.26100", "example.com/app:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustSucceed(t, append([]string{"runtimeclass"}, tc.args...)...)
			if r.stderr != "" {
				t.Errorf("stderr %q", r.stderr)
			}
			rcs, deps := decodeStream(t, r.stdout)
			var names []string
			for _, rc := range rcs {
				names = append(names, rc.Name)
				if rc.Handler != tc.handler {
					t.Errorf("%s: handler %q, want %q", rc.Name, rc.Handler, tc.handler)
				}
				if rc.Scheduling == nil || rc.Scheduling.NodeSelector["kubernetes.io/os"] != "windows" || len(rc.Scheduling.Tolerations) != 1 {
					t.Errorf("%s: scheduling %+v", rc.Name, rc.Scheduling)
				}
			}
			if !slices.Equal(names, tc.wantRCs) {
				t.Fatalf("RuntimeClasses %q, want %q", names, tc.wantRCs)
			}
			if got := rcs[0].Scheduling.NodeSelector[winbuild.LabelKey]; got != tc.build {
				t.Errorf("windows-build %q, want %q", got, tc.build)
			}
			if tc.wantImage == "" {
				if len(deps) != 0 {
					t.Errorf("%d Deployments, want none", len(deps))
				}
				return
			}
			if len(deps) != 1 {
				t.Fatalf("%d Deployments, want 1", len(deps))
			}
			ps := deps[0].Spec.Template.Spec
			if ps.RuntimeClassName == nil || *ps.RuntimeClassName != rcs[0].Name || ps.Containers[0].Image != tc.wantImage {
				t.Errorf("Deployment runtimeClassName %v image %q, want %q %q", ps.RuntimeClassName, ps.Containers[0].Image, rcs[0].Name, tc.wantImage)
			}
		})
	}
}

func TestRuntimeClassUsageErrors(t *testing.T) {
	withHostBuild(t, winbuild.Version{Major: 10, Minor: 0, Build: 20348}, nil)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-frob"}, "flag provided but not defined: -frob"},
		{"stray argument", []string{"-build", "10.0.20348", "extra"}, `unexpected argument "extra"`},
		{"bad handler", []string{"-handler", "Win_Proc"}, `-handler: invalid runtime handler name "Win_Proc"`},
		{"empty handler", []string{"-handler", ""}, "-handler: runtime handler name is empty"},
		{"long handler", []string{"-handler", strings.Repeat("h", 64)}, "no more than 63 characters"},
		{"bad build", []string{"-build", "ltsc2022"}, "-build: invalid Windows OS version"},
		{"zero build", []string{"-build", "10.0.0"}, "a Windows build is required"},
		{"build and host", []string{"-build", "10.0.20348", "-host"}, "-build and -host exclude each other"},
		{"deployment without build", []string{"-deployment", "example.com/app:1"}, "-deployment needs -build or -host"},
		{"deployment without image", []string{"-build", "10.0.20348", "-deployment", ""}, "-deployment needs an image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, append([]string{"runtimeclass"}, tc.args...)...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\nstderr: %s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "Usage: winproc runtimeclass") {
				t.Errorf("stderr %q, want %q and the usage", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
}

func TestRuntimeClassFailures(t *testing.T) {
	t.Run("host unknown", func(t *testing.T) {
		withHostBuild(t, winbuild.Version{}, errors.New("read the host's Windows revision: access denied"))
		r := runCmd(t, "runtimeclass", "-host")
		if r.code != 1 {
			t.Errorf("exit %d, want 1\nstderr: %s", r.code, r.stderr)
		}
		const want = "winproc runtimeclass: -host: read the host's Windows revision: access denied\n"
		if r.stderr != want || r.stdout != "" {
			t.Errorf("stdout %q stderr %q, want stderr %q", r.stdout, r.stderr, want)
		}
	})
	t.Run("host build zero", func(t *testing.T) {
		withHostBuild(t, winbuild.Version{Major: 10}, nil)
		r := runCmd(t, "runtimeclass", "-host")
		if r.code != 1 || !strings.HasPrefix(r.stderr, "winproc runtimeclass: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("exit %d stderr %q, want 1 and one line", r.code, r.stderr)
		}
	})
	if runtime.GOOS != "windows" {
		// The real winbuild.Host: only Windows knows its build.
		t.Run("host not windows", func(t *testing.T) {
			r := runCmd(t, "runtimeclass", "-host")
			if r.code != 1 || !strings.HasPrefix(r.stderr, "winproc runtimeclass: -host: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d stderr %q, want 1 and one -host line", r.code, r.stderr)
			}
		})
	}
}

func TestRuntimeClassHelp(t *testing.T) {
	for _, args := range [][]string{{"runtimeclass", "-h"}, {"runtimeclass", "--help"}} {
		r := runCmd(t, args...)
		if r.code != 0 || !strings.Contains(r.stderr, "Usage: winproc runtimeclass") || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCmd(t, "help"); !strings.Contains(r.stdout, "runtimeclass") {
		t.Errorf("winproc help does not list runtimeclass:\n%s", r.stdout)
	}
}
