// Package runtimeclass builds the Kubernetes objects that select winproc for
// a pod: one node.k8s.io/v1 RuntimeClass per Windows build, and an example
// Deployment that uses one. The objects are the Kubernetes API types
// (k8s.io/api), written out as YAML with their apiVersion and kind, so what
// the API server accepts is checked by the compiler and by strict decoding in
// the tests rather than by string templates.
//
// A RuntimeClass ties three things together:
//
//   - handler: the containerd runtime handler that runs the pod, the name
//     package containerdconfig registers (default "winproc");
//   - scheduling.nodeSelector: Windows amd64 nodes of one Windows build
//     (node.kubernetes.io/windows-build), because process isolation needs
//     the image's build to match the host's (see package winbuild);
//   - scheduling.tolerations: the os=windows:NoSchedule taint that mixed
//     clusters commonly put on Windows nodes to keep Linux pods off them.
//
// The RuntimeClass admission controller merges the selector and the
// tolerations into every pod that names the class, so workloads only set
// runtimeClassName. The ready manifests in manifests/ are this package's
// output (TestManifestsUpToDate keeps them so), and `winproc runtimeclass`
// prints the same objects for any handler and build.
package runtimeclass

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/winproc/winproc/winbuild"
)

// DefaultHandler is the containerd runtime handler name winproc is
// registered under by default (containerdconfig's default node).
const DefaultHandler = "winproc"

// Well-known node labels and the Windows taint the RuntimeClasses use.
const (
	// OSLabel and ArchLabel are set by the kubelet on every node.
	OSLabel   = corev1.LabelOSStable   // kubernetes.io/os
	ArchLabel = corev1.LabelArchStable // kubernetes.io/arch
	// BuildLabel is set by the kubelet on Windows nodes to the host's
	// major.minor.build.
	BuildLabel = winbuild.LabelKey // node.kubernetes.io/windows-build
	// TaintKey and TaintValue make the toleration os=windows:NoSchedule,
	// the taint recommended for Windows nodes in mixed clusters.
	TaintKey   = "os"
	TaintValue = "windows"
	// Arch is the only architecture winproc's containerd config
	// registers (containerdnames.Platform).
	Arch = "amd64"
)

// LTSC are the Windows Server LTSC builds the ready manifests cover, oldest
// first.
var LTSC = []winbuild.Version{
	{Major: 10, Minor: 0, Build: 17763}, // ltsc2019
	{Major: 10, Minor: 0, Build: 20348}, // ltsc2022
	{Major: 10, Minor: 0, Build: 26100}, // ltsc2025
}

// ValidateHandler checks a runtime handler name the way Kubernetes validates
// RuntimeClass.handler: a lowercase RFC 1123 DNS label (at most 63
// characters of a-z, 0-9 and '-', starting and ending with an alphanumeric).
// containerd uses the name as a key of its runtimes table and the kubelet
// passes it through CRI unchanged, so a valid label works in both.
func ValidateHandler(handler string) error {
	if handler == "" {
		return errors.New("runtime handler name is empty")
	}
	if msgs := validation.IsDNS1123Label(handler); len(msgs) > 0 {
		return fmt.Errorf("invalid runtime handler name %q: %s", handler, strings.Join(msgs, "; "))
	}
	return nil
}

// Name returns the RuntimeClass name for handler and build: the handler,
// a dash and the build's release name lowercased with spaces as dashes
// (winproc-ltsc2022, winproc-20h2, winproc-windows-11-22h2), or, for a
// 10.0 build winbuild does not name, its build number (winproc-27000). A
// version other than 10.0 spells out major-minor-build (winproc-6-3-9600),
// so no two builds share a name.
func Name(handler string, build winbuild.Version) string {
	return handler + "-" + buildSuffix(build)
}

func buildSuffix(v winbuild.Version) string {
	if v.Major != 10 || v.Minor != 0 {
		return fmt.Sprintf("%d-%d-%d", v.Major, v.Minor, v.Build)
	}
	if r := winbuild.Release(v.Build); r != "" {
		return strings.ReplaceAll(strings.ToLower(r), " ", "-")
	}
	return strconv.FormatUint(uint64(v.Build), 10)
}

// New returns the RuntimeClass that runs pods with handler on Windows amd64
// nodes of build's major.minor.build (the revision is ignored: it does not
// affect compatibility, and the node label does not carry it). It refuses an
// invalid handler name, a zero build and a name Kubernetes would refuse.
func New(handler string, build winbuild.Version) (*nodev1.RuntimeClass, error) {
	if err := ValidateHandler(handler); err != nil {
		return nil, err
	}
	if build.Build == 0 {
		return nil, fmt.Errorf("RuntimeClass for %s: a Windows build is required, e.g. 10.0.20348", build.Label())
	}
	rc := &nodev1.RuntimeClass{
		TypeMeta: metav1.TypeMeta{APIVersion: nodev1.SchemeGroupVersion.String(), Kind: "RuntimeClass"},
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(handler, build),
		},
		Handler: handler,
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{
				OSLabel:    "windows",
				ArchLabel:  Arch,
				BuildLabel: build.Label(),
			},
			Tolerations: []corev1.Toleration{{
				Key:      TaintKey,
				Operator: corev1.TolerationOpEqual,
				Value:    TaintValue,
				Effect:   corev1.TaintEffectNoSchedule,
			}},
		},
	}
	if err := validate(rc); err != nil {
		return nil, err
	}
	return rc, nil
}

// validate checks what the API server checks of the fields New sets.
func validate(rc *nodev1.RuntimeClass) error {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(rc.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), rc.Name, msg))
	}
	if s := rc.Scheduling; s != nil {
		errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, field.NewPath("scheduling", "nodeSelector"))...)
	}
	if err := errs.ToAggregate(); err != nil {
		return fmt.Errorf("RuntimeClass %q: %w", rc.Name, err)
	}
	return nil
}

// Example Deployment settings: the test app's HTTP server (winproc-testapp
// serve) on port 8080 of every address, so the kubelet's probes reach it.
const (
	ExampleName = "winproc-testapp"
	examplePort = 8080
)

// ExampleDeployment returns a Deployment of one replica of the winproc test
// app (an image whose entrypoint is winproc-testapp.exe, as built by
// `winproc image build -entrypoint C:\winproc-testapp.exe`), run by rc.
//
// The pod sets runtimeClassName and nothing about placement: no nodeSelector
// for kubernetes.io/os, arch or windows-build, and no toleration for the
// Windows taint. The RuntimeClass admission controller adds rc's
// scheduling.nodeSelector and tolerations to the pod, so the workload
// follows the class (change the class, and every pod using it lands on the
// right build) and cannot contradict it — admission refuses a pod whose own
// nodeSelector conflicts with its class's. The pod does set spec.os.name:
// windows, which is not a placement rule but tells the API server to apply
// the Windows pod validation (no Linux-only security fields) and the kubelet
// to refuse the pod on a node of another OS.
//
// The container serves HTTP on port 8080 (named http) and is ready when
// GET /healthz answers.
func ExampleDeployment(rc *nodev1.RuntimeClass, image string) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": ExampleName}
	replicas := int32(1)
	rcName := rc.Name
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   ExampleName,
			Labels: labels,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RuntimeClassName: &rcName,
					OS:               &corev1.PodOS{Name: corev1.Windows},
					Containers: []corev1.Container{{
						Name:  "testapp",
						Image: image,
						Args:  []string{"serve", "-addr", "0.0.0.0:" + strconv.Itoa(examplePort)},
						Ports: []corev1.ContainerPort{{
							Name:          "http",
							ContainerPort: examplePort,
							Protocol:      corev1.ProtocolTCP,
						}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{
								HTTPGet: &corev1.HTTPGetAction{
									Path: "/healthz",
									Port: intstr.FromString("http"),
								},
							},
							PeriodSeconds:  5,
							TimeoutSeconds: 2,
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{
								corev1.ResourceCPU:    resource.MustParse("100m"),
								corev1.ResourceMemory: resource.MustParse("64Mi"),
							},
							Limits: corev1.ResourceList{
								corev1.ResourceCPU:    resource.MustParse("500m"),
								corev1.ResourceMemory: resource.MustParse("256Mi"),
							},
						},
					}},
				},
			},
		},
	}
}

// scheme knows the kinds YAML writes.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{nodev1.AddToScheme, appsv1.AddToScheme, corev1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// YAML writes objs as one YAML stream, documents separated by "---", each
// with its apiVersion and kind (taken from the scheme: node/v1, apps/v1 and
// core/v1 objects; the objects themselves are not modified). An empty status
// is left out, as kubectl does not need it; keys are sorted.
func YAML(objs ...runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		if obj == nil {
			return nil, fmt.Errorf("object %d is nil", i)
		}
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		j, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvks[0].Kind, err)
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", gvks[0].Kind, err)
		}
		if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
			delete(m, "status")
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvks[0].Kind, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(y)
	}
	return buf.Bytes(), nil
}

// ExampleImage is the image the committed example Deployment names: the
// integration tests' test app image, built for ltsc2022. Replace it with a
// registry you push the test app to.
const ExampleImage = "example.com/winproc/testapp:ltsc2022"

// Manifests returns the ready manifests of manifests/, by file name: one
// RuntimeClass per LTSC build for DefaultHandler (winproc-ltsc2019.yaml,
// ...), and example-deployment.yaml, ExampleDeployment of the ltsc2022
// class with ExampleImage. Each starts with a comment saying how it was
// made.
func Manifests() (map[string][]byte, error) {
	files := make(map[string][]byte)
	var ltsc2022 *nodev1.RuntimeClass
	for _, b := range LTSC {
		rc, err := New(DefaultHandler, b)
		if err != nil {
			return nil, err
		}
		if b.Build == 20348 {
			ltsc2022 = rc
		}
		y, err := YAML(rc)
		if err != nil {
			return nil, err
		}
		files[rc.Name+".yaml"] = header(y,
			fmt.Sprintf("RuntimeClass %s: pods run by the containerd handler %q on Windows %s nodes (%s).",
				rc.Name, rc.Handler, b.Label(), winbuild.Release(b.Build)),
			fmt.Sprintf("Another handler or build: winproc runtimeclass -handler NAME -build %s", b.Label()))
	}
	y, err := YAML(ExampleDeployment(ltsc2022, ExampleImage))
	if err != nil {
		return nil, err
	}
	files["example-deployment.yaml"] = header(y,
		fmt.Sprintf("Example: the winproc test app run by RuntimeClass %s; set the image to yours.", ltsc2022.Name),
		"The RuntimeClass adds the Windows node selector and toleration to the pods.",
		"With its RuntimeClass: winproc runtimeclass -build 10.0.20348 -deployment IMAGE")
	return files, nil
}

func header(y []byte, lines ...string) []byte {
	var b bytes.Buffer
	b.WriteString("# Code generated by github.com/winproc/winproc/runtimeclass. DO NOT EDIT.\n")
	b.WriteString("# Regenerate: go test ./runtimeclass -run TestManifestsUpToDate -update\n")
	for _, l := range lines {
		b.WriteString("# " + l + "\n")
	}
	b.Write(y)
	return b.Bytes()
}
