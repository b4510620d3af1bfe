package doctor

import (
	"reflect"
	"strings"
	"testing"

	"github.com/winproc/winproc/runtimeclass"
	"github.com/winproc/winproc/winbuild"
)

var ltsc2022 = winbuild.Version{Major: 10, Minor: 0, Build: 20348}

const twoClasses = `# two classes and something else
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: winproc-ltsc2022
handler: winproc
scheduling:
  nodeSelector:
    kubernetes.io/os: windows
    node.kubernetes.io/windows-build: "10.0.20348"
  tolerations:
  - key: os
    operator: Equal
    value: windows
    effect: NoSchedule
---
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data: {a: b}
---
# empty document above and below
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: winproc-ltsc2019
handler: winproc
scheduling:
  nodeSelector: {node.kubernetes.io/windows-build: 10.0.17763}
  tolerations: [{key: os, operator: Exists}]
`

const listJSON = `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "runhcs"}, "handler": "runhcs-wcow-process"},
  {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "plain"}, "handler": "winproc"}
]}`

func TestDoctorParseRuntimeClasses(t *testing.T) {
	got, err := ParseRuntimeClasses("a.yaml", []byte(twoClasses))
	if err != nil {
		t.Fatal(err)
	}
	want := []RuntimeClass{
		{File: "a.yaml", Name: "winproc-ltsc2022", Handler: "winproc",
			NodeSelector: map[string]string{"kubernetes.io/os": "windows", winbuild.LabelKey: "10.0.20348"},
			Tolerations:  []map[string]string{{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}}},
		{File: "a.yaml", Name: "winproc-ltsc2019", Handler: "winproc",
			NodeSelector: map[string]string{winbuild.LabelKey: "10.0.17763"},
			Tolerations:  []map[string]string{{"key": "os", "operator": "Exists"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("YAML:\n got %+v\nwant %+v", got, want)
	}

	got, err = ParseRuntimeClasses("l.json", []byte(listJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Handler != "runhcs-wcow-process" || got[1].Name != "plain" || got[1].NodeSelector != nil {
		t.Errorf("JSON List: %+v", got)
	}

	if _, err := ParseRuntimeClasses("bad.yaml", []byte("kind: RuntimeClass\n  handler: [oops\n")); err == nil {
		t.Error("broken YAML parsed")
	}
}

// The manifests package runtimeclass ships pass for their own build and
// select only it.
func TestDoctorShippedManifests(t *testing.T) {
	ms, err := runtimeclass.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range runtimeclass.LTSC {
		name := runtimeclass.Name(runtimeclass.DefaultHandler, v) + ".yaml"
		b, ok := ms[name]
		if !ok {
			t.Fatalf("no shipped manifest %s", name)
		}
		classes, err := ParseRuntimeClasses(name, b)
		if err != nil {
			t.Fatal(err)
		}
		r := EvaluateRuntimeClasses(classes, []string{name}, runtimeclass.DefaultHandler, v)
		if r.Status != OK {
			t.Errorf("%s on %s: %+v", name, v.Label(), r)
		}
		other := winbuild.Version{Major: 10, Minor: 0, Build: 26100}
		if v.Build == other.Build {
			other.Build = 20348
		}
		if r := EvaluateRuntimeClasses(classes, []string{name}, runtimeclass.DefaultHandler, other); r.Status != Fail {
			t.Errorf("%s passes on %s: %+v", name, other.Label(), r)
		}
	}
}

func TestDoctorTolerates(t *testing.T) {
	for _, tc := range []struct {
		t    map[string]string
		want bool
	}{
		{map[string]string{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}, true},
		{map[string]string{"key": "os", "value": "windows", "effect": "NoSchedule"}, true}, // Equal is the default
		{map[string]string{"key": "os", "value": "windows"}, true},                         // all effects
		{map[string]string{"key": "os", "operator": "Exists"}, true},
		{map[string]string{"operator": "Exists"}, true}, // everything
		{map[string]string{"key": "os", "operator": "Equal", "value": "linux", "effect": "NoSchedule"}, false},
		{map[string]string{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoExecute"}, false},
		{map[string]string{"key": "other", "operator": "Exists"}, false},
		{map[string]string{"value": "windows"}, false}, // Equal needs the key
	} {
		rc := RuntimeClass{Tolerations: []map[string]string{tc.t}}
		if got := rc.Tolerates(); got != tc.want {
			t.Errorf("%v tolerates os=windows:NoSchedule: %v, want %v", tc.t, got, tc.want)
		}
	}
	if (RuntimeClass{}).Tolerates() {
		t.Error("no tolerations tolerate the taint")
	}
}

func TestDoctorEvaluateRuntimeClasses(t *testing.T) {
	tol := []map[string]string{{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}}
	sel := func(build string) map[string]string {
		return map[string]string{"kubernetes.io/os": "windows", "kubernetes.io/arch": "amd64", winbuild.LabelKey: build}
	}
	good := RuntimeClass{File: "f", Name: "winproc-ltsc2022", Handler: "winproc", NodeSelector: sel("10.0.20348"), Tolerations: tol}
	old := RuntimeClass{File: "f", Name: "winproc-ltsc2019", Handler: "winproc", NodeSelector: sel("10.0.17763"), Tolerations: tol}
	for _, tc := range []struct {
		name    string
		classes []RuntimeClass
		status  Status
		summary string
		fix     string
	}{
		{"matching", []RuntimeClass{good}, OK, "RuntimeClass winproc-ltsc2022 (handler winproc) selects 10.0.20348 (ltsc2022) and tolerates os=windows:NoSchedule", ""},
		{"one per build", []RuntimeClass{old, good}, OK, "RuntimeClass winproc-ltsc2022", ""},
		{"none for the handler", []RuntimeClass{{File: "f", Name: "x", Handler: "runhcs"}}, Fail,
			`no RuntimeClass in f names handler "winproc"`, "winproc runtimeclass -handler winproc -build 10.0.20348 | kubectl apply -f -"},
		{"another build only", []RuntimeClass{old}, Fail,
			`no RuntimeClass for handler "winproc" selects this node's build 10.0.20348 (ltsc2022)`, "winproc runtimeclass -handler winproc -build 10.0.20348"},
		{"no build label", []RuntimeClass{{File: "f", Name: "w", Handler: "winproc", Tolerations: tol}}, Fail,
			`no RuntimeClass for handler "winproc" selects this node's build`, `add to RuntimeClass w (f)'s scheduling.nodeSelector: node.kubernetes.io/windows-build: "10.0.20348"`},
		{"a revision in the label is not a build", []RuntimeClass{{File: "f", Name: "w", Handler: "winproc", NodeSelector: sel("10.0.20348.1"), Tolerations: tol}}, Fail,
			"selects this node's build", "winproc runtimeclass"},
		{"no toleration", []RuntimeClass{{File: "f", Name: "w", Handler: "winproc", NodeSelector: sel("10.0.20348")}}, Fail,
			"RuntimeClass w (f) lacks the toleration os=windows:NoSchedule in scheduling.tolerations", "    effect: NoSchedule"},
		{"linux", []RuntimeClass{{File: "f", Name: "w", Handler: "winproc", NodeSelector: map[string]string{"kubernetes.io/os": "linux", winbuild.LabelKey: "10.0.20348"}, Tolerations: tol}}, Fail,
			"RuntimeClass w (f) selects kubernetes.io/os=linux", "set kubernetes.io/os: windows"},
		{"arm64", []RuntimeClass{{File: "f", Name: "w", Handler: "winproc", NodeSelector: map[string]string{"kubernetes.io/arch": "arm64", winbuild.LabelKey: "10.0.20348"}, Tolerations: tol}}, Fail,
			"selects kubernetes.io/arch=arm64", "set kubernetes.io/arch: amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := EvaluateRuntimeClasses(tc.classes, []string{"f"}, "winproc", ltsc2022)
			if r.Status != tc.status || !strings.Contains(r.Summary, tc.summary) {
				t.Errorf("got %s %q, want %s %q\n%+v", r.Status, r.Summary, tc.status, tc.summary, r)
			}
			if fix := strings.Join(r.Fix, "\n"); tc.fix != "" && !strings.Contains(fix, tc.fix) {
				t.Errorf("fix %q lacks %q", fix, tc.fix)
			}
			if tc.status == OK && len(r.Fix) > 0 {
				t.Errorf("OK with a fix: %q", r.Fix)
			}
		})
	}
}
