package runtimeclass

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/yaml"

	"github.com/winproc/winproc/winbuild"
)

var update = flag.Bool("update", false, "rewrite manifests/ from the generator")

const manifestsDir = "manifests"

// documents splits a YAML stream into its documents.
func documents(t *testing.T, y []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, d := range bytes.Split(y, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// decodeStrict decodes one YAML document twice, both strictly (unknown or
// duplicate fields fail): with sigs.k8s.io/yaml into into, and with
// apimachinery's YAML codec, which also checks that apiVersion and kind name
// want's type. It returns the codec's object.
func decodeStrict(t *testing.T, doc []byte, into any, want schema.GroupVersionKind) runtime.Object {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("strict decode into %T: %v\n%s", into, err, doc)
	}
	codec := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
	obj, gvk, err := codec.Decode(doc, nil, nil)
	if err != nil {
		t.Fatalf("codec decode: %v\n%s", err, doc)
	}
	if *gvk != want {
		t.Fatalf("decoded %v, want %v", *gvk, want)
	}
	return obj
}

var rcKind = nodev1.SchemeGroupVersion.WithKind("RuntimeClass")
var deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

func v(major, minor, build, rev uint32) winbuild.Version {
	return winbuild.Version{Major: major, Minor: minor, Build: build, Revision: rev}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handler  string
		build    winbuild.Version
		wantName string
		wantSel  string // node.kubernetes.io/windows-build
	}{
		{"ltsc2019", "winproc", v(10, 0, 17763, 0), "winproc-ltsc2019", "10.0.17763"},
		{"ltsc2022", "winproc", v(10, 0, 20348, 0), "winproc-ltsc2022", "10.0.20348"},
		{"ltsc2025", "winproc", v(10, 0, 26100, 0), "winproc-ltsc2025", "10.0.26100"},
		{"revision ignored", "winproc", v(10, 0, 20348, 2227), "winproc-ltsc2022", "10.0.20348"},
		{"unnamed build", "winproc", v(10, 0, 27000, 0), "winproc-27000", "10.0.27000"},
		{"uppercase release", "winproc", v(10, 0, 19042, 0), "winproc-20h2", "10.0.19042"},
		{"release with spaces", "winproc", v(10, 0, 22621, 0), "winproc-windows-11-22h2", "10.0.22621"},
		{"not 10.0", "winproc", v(6, 3, 9600, 0), "winproc-6-3-9600", "6.3.9600"},
		{"other handler", "winproc-debug", v(10, 0, 20348, 0), "winproc-debug-ltsc2022", "10.0.20348"},
		{"longest handler", strings.Repeat("h", 63), v(10, 0, 26100, 0), strings.Repeat("h", 63) + "-ltsc2025", "10.0.26100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := New(tc.handler, tc.build)
			if err != nil {
				t.Fatal(err)
			}
			y, err := YAML(rc)
			if err != nil {
				t.Fatal(err)
			}
			docs := documents(t, y)
			if len(docs) != 1 {
				t.Fatalf("%d documents, want 1:\n%s", len(docs), y)
			}
			var got nodev1.RuntimeClass
			obj := decodeStrict(t, docs[0], &got, rcKind)
			if !reflect.DeepEqual(obj.(*nodev1.RuntimeClass), &got) {
				t.Errorf("the codec and sigs.k8s.io/yaml disagree:\n%#v\n%#v", obj, &got)
			}
			if got.APIVersion != "node.k8s.io/v1" || got.Kind != "RuntimeClass" {
				t.Errorf("apiVersion %q kind %q", got.APIVersion, got.Kind)
			}
			if got.Name != tc.wantName || got.Handler != tc.handler {
				t.Errorf("name %q handler %q, want %q %q", got.Name, got.Handler, tc.wantName, tc.handler)
			}
			if got.Scheduling == nil {
				t.Fatalf("no scheduling:\n%s", y)
			}
			wantSel := map[string]string{
				"kubernetes.io/os":                 "windows",
				"kubernetes.io/arch":               "amd64",
				"node.kubernetes.io/windows-build": tc.wantSel,
			}
			if !reflect.DeepEqual(got.Scheduling.NodeSelector, wantSel) {
				t.Errorf("nodeSelector %v, want %v", got.Scheduling.NodeSelector, wantSel)
			}
			wantTol := []corev1.Toleration{{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}}
			if !reflect.DeepEqual(got.Scheduling.Tolerations, wantTol) {
				t.Errorf("tolerations %+v, want %+v", got.Scheduling.Tolerations, wantTol)
			}
			if got.Overhead != nil {
				t.Errorf("overhead %+v, want none", got.Overhead)
			}
			// The label value must read back as the build.
			if b, err := winbuild.ParseLabel(got.Scheduling.NodeSelector[BuildLabel]); err != nil || b.Label() != tc.build.Label() {
				t.Errorf("windows-build label %q: %v, %v", got.Scheduling.NodeSelector[BuildLabel], b, err)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	good := v(10, 0, 20348, 0)
	for _, tc := range []struct {
		name    string
		handler string
		build   winbuild.Version
		want    string
	}{
		{"empty handler", "", good, "empty"},
		{"uppercase", "WinProc", good, "invalid runtime handler name"},
		{"underscore", "win_proc", good, "invalid runtime handler name"},
		{"dot", "win.proc", good, "invalid runtime handler name"},
		{"space", "win proc", good, "invalid runtime handler name"},
		{"leading dash", "-winproc", good, "invalid runtime handler name"},
		{"trailing dash", "winproc-", good, "invalid runtime handler name"},
		{"slash", "io.containerd/winproc", good, "invalid runtime handler name"},
		{"64 characters", strings.Repeat("h", 64), good, "must be no more than 63 characters"},
		{"no build", "winproc", winbuild.Version{}, "a Windows build is required"},
		{"build 0", "winproc", v(10, 0, 0, 5), "a Windows build is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := New(tc.handler, tc.build)
			if err == nil {
				t.Fatalf("accepted: %+v", rc)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
			if rc != nil {
				t.Errorf("returned %+v with the error", rc)
			}
			if tc.handler != "winproc" && ValidateHandler(tc.handler) == nil {
				t.Errorf("ValidateHandler(%q) accepted it", tc.handler)
			}
		})
	}
	for _, h := range []string{"winproc", "w", "0", "winproc-2", strings.Repeat("h", 63)} {
		if err := ValidateHandler(h); err != nil {
			t.Errorf("ValidateHandler(%q): %v", h, err)
		}
	}
}

func TestExampleDeployment(t *testing.T) {
	rc, err := New("winproc", v(10, 0, 26100, 0))
	if err != nil {
		t.Fatal(err)
	}
	const image = "registry.example/testapp:ltsc2025"
	y, err := YAML(ExampleDeployment(rc, image))
	if err != nil {
		t.Fatal(err)
	}
	docs := documents(t, y)
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1:\n%s", len(docs), y)
	}
	var d appsv1.Deployment
	decodeStrict(t, docs[0], &d, deploymentKind)
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" || d.Name != ExampleName {
		t.Errorf("apiVersion %q kind %q name %q", d.APIVersion, d.Kind, d.Name)
	}
	if bytes.Contains(y, []byte("status:")) {
		t.Errorf("empty status written:\n%s", y)
	}
	if d.Spec.Selector == nil || !reflect.DeepEqual(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || len(d.Spec.Template.Labels) == 0 {
		t.Errorf("selector %+v does not match the template labels %v", d.Spec.Selector, d.Spec.Template.Labels)
	}
	ps := d.Spec.Template.Spec
	if ps.RuntimeClassName == nil || *ps.RuntimeClassName != rc.Name {
		t.Errorf("runtimeClassName %v, want %q", ps.RuntimeClassName, rc.Name)
	}
	// Placement is the RuntimeClass's: the pod repeats none of it.
	if len(ps.NodeSelector) != 0 || len(ps.Tolerations) != 0 || ps.Affinity != nil {
		t.Errorf("pod sets its own placement: nodeSelector %v tolerations %v affinity %v", ps.NodeSelector, ps.Tolerations, ps.Affinity)
	}
	if ps.OS == nil || ps.OS.Name != corev1.Windows {
		t.Errorf("os %+v, want windows", ps.OS)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.Image != image {
		t.Errorf("image %q, want %q", c.Image, image)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 || c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Fatalf("ports %+v, want TCP 8080", c.Ports)
	}
	if !slices.Equal(c.Args, []string{"serve", "-addr", "0.0.0.0:8080"}) {
		t.Errorf("args %q: want the test app serving on every address of port 8080", c.Args)
	}
	p := c.ReadinessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Fatalf("readiness probe %+v, want GET /healthz", p)
	}
	if p.HTTPGet.Port.String() != c.Ports[0].Name && p.HTTPGet.Port.IntValue() != int(c.Ports[0].ContainerPort) {
		t.Errorf("probe port %v is not the container port %+v", p.HTTPGet.Port.String(), c.Ports[0])
	}
}

func TestYAML(t *testing.T) {
	rc, err := New("winproc", v(10, 0, 20348, 0))
	if err != nil {
		t.Fatal(err)
	}
	// An object without TypeMeta still gets apiVersion and kind, and YAML
	// leaves its argument alone.
	bare := ExampleDeployment(rc, "x")
	bare.TypeMeta = metav1.TypeMeta{}
	bareRC := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Handler: "winproc"}
	y, err := YAML(rc, bare, bareRC)
	if err != nil {
		t.Fatal(err)
	}
	if bare.Kind != "" || bareRC.Kind != "" {
		t.Errorf("YAML set the TypeMeta of its arguments")
	}
	docs := documents(t, y)
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3:\n%s", len(docs), y)
	}
	var r1, r3 nodev1.RuntimeClass
	var d appsv1.Deployment
	decodeStrict(t, docs[0], &r1, rcKind)
	decodeStrict(t, docs[1], &d, deploymentKind)
	decodeStrict(t, docs[2], &r3, rcKind)
	if r1.Name != rc.Name || *d.Spec.Template.Spec.RuntimeClassName != rc.Name || r3.Name != "bare" {
		t.Errorf("documents out of order: %q %q %q", r1.Name, d.Name, r3.Name)
	}
	if !bytes.HasPrefix(y, []byte("apiVersion: ")) {
		t.Errorf("stream does not start with a document:\n%s", y)
	}

	for _, tc := range []struct {
		name string
		obj  runtime.Object
	}{
		{"kind not in the scheme", &batchv1.Job{}},
		{"nil", nil},
	} {
		if _, err := YAML(rc, tc.obj); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if y, err := YAML(); err != nil || len(y) != 0 {
		t.Errorf("YAML(): %q, %v", y, err)
	}
}

// TestManifestsUpToDate compares manifests/ with the generator; run with
// -update to rewrite it.
func TestManifestsUpToDate(t *testing.T) {
	want, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	wantNames := []string{"example-deployment.yaml", "winproc-ltsc2019.yaml", "winproc-ltsc2022.yaml", "winproc-ltsc2025.yaml"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("generator makes %q, want %q", names, wantNames)
	}
	existing, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(manifestsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range existing {
			if _, ok := want[filepath.Base(f)]; !ok {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(manifestsDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	const hint = "; run: go test ./runtimeclass -run TestManifestsUpToDate -update"
	for _, f := range existing {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("%s is not generated any more%s", f, hint)
		}
	}
	for _, name := range names {
		path := filepath.Join(manifestsDir, name)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v%s", err, hint)
			continue
		}
		if !bytes.Equal(got, want[name]) {
			t.Errorf("%s differs from the generator's output%s\n--- got\n%s\n--- want\n%s", path, hint, got, want[name])
		}
	}
	// The committed files are what operators apply: decode them as such.
	for _, name := range names[1:] {
		var rc nodev1.RuntimeClass
		decodeStrict(t, documents(t, want[name])[0], &rc, rcKind)
		if rc.Name+".yaml" != name || rc.Handler != DefaultHandler {
			t.Errorf("%s holds RuntimeClass %q handler %q", name, rc.Name, rc.Handler)
		}
	}
	var d appsv1.Deployment
	decodeStrict(t, documents(t, want["example-deployment.yaml"])[0], &d, deploymentKind)
	if rcn := d.Spec.Template.Spec.RuntimeClassName; rcn == nil || *rcn != "winproc-ltsc2022" {
		t.Errorf("example Deployment's runtimeClassName %v, want winproc-ltsc2022", rcn)
	}
}
