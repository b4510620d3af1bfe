package doctor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/winproc/winproc/runtimeclass"
	"github.com/winproc/winproc/winbuild"
)

// Scheduling a RuntimeClass needs on Windows nodes (as package runtimeclass
// generates it): the build label that keeps pods on nodes whose build runs
// their images under process isolation, and the toleration of the taint
// Windows nodes carry so Linux pods stay off them.
const (
	osLabel        = runtimeclass.OSLabel
	archLabel      = runtimeclass.ArchLabel
	taintKey       = runtimeclass.TaintKey
	taintValue     = runtimeclass.TaintValue
	taintEffect    = "NoSchedule"
	tolerationText = taintKey + "=" + taintValue + ":" + taintEffect
)

// RuntimeClass is a RuntimeClass object read from a manifest.
type RuntimeClass struct {
	File, Name, Handler string
	// NodeSelector is scheduling.nodeSelector.
	NodeSelector map[string]string
	// Tolerations are scheduling.tolerations.
	Tolerations []map[string]string
}

// ParseRuntimeClasses reads the RuntimeClass objects of a manifest: YAML or
// JSON, one document or several, List kinds included. Other kinds are left
// out.
func ParseRuntimeClasses(file string, data []byte) ([]RuntimeClass, error) {
	var docs []any
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	var out []RuntimeClass
	var walk func(v any)
	walk = func(v any) {
		m := asMap(v)
		if m == nil {
			return
		}
		kind := asString(m["kind"])
		if items, ok := m["items"].([]any); ok && (kind == "List" || strings.HasSuffix(kind, "List")) {
			for _, it := range items {
				walk(it)
			}
			return
		}
		if kind != "RuntimeClass" {
			return
		}
		rc := RuntimeClass{File: file, Name: asString(asMap(m["metadata"])["name"]), Handler: asString(m["handler"])}
		sched := asMap(m["scheduling"])
		if ns := asMap(sched["nodeSelector"]); ns != nil {
			rc.NodeSelector = map[string]string{}
			for k, v := range ns {
				rc.NodeSelector[k] = scalar(v)
			}
		}
		if ts, ok := sched["tolerations"].([]any); ok {
			for _, t := range ts {
				tm := map[string]string{}
				for k, v := range asMap(t) {
					tm[k] = scalar(v)
				}
				rc.Tolerations = append(rc.Tolerations, tm)
			}
		}
		out = append(out, rc)
	}
	for _, d := range docs {
		walk(d)
	}
	return out, nil
}

// scalar is a YAML scalar as a string: JSON decoding makes 10.0 a number
// and true a boolean.
func scalar(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	}
	return fmt.Sprint(v)
}

// Tolerates reports whether the class's pods tolerate the os=windows
// NoSchedule taint, with Kubernetes' rules: a matching key (or an empty key
// with operator Exists), operator Exists or Equal (the default) with the
// value, and the effect NoSchedule or empty (all effects).
func (rc RuntimeClass) Tolerates() bool {
	for _, t := range rc.Tolerations {
		op := t["operator"]
		if op == "" {
			op = "Equal"
		}
		if e := t["effect"]; e != "" && e != taintEffect {
			continue
		}
		switch {
		case op == "Exists" && (t["key"] == "" || t["key"] == taintKey):
			return true
		case op == "Equal" && t["key"] == taintKey && t["value"] == taintValue:
			return true
		}
	}
	return false
}

// BuildProblem says why the class does not keep its pods on nodes of host's
// build; "" if it does.
func (rc RuntimeClass) BuildProblem(host winbuild.Version) string {
	v, ok := rc.NodeSelector[winbuild.LabelKey]
	if !ok {
		return fmt.Sprintf("has no %s in scheduling.nodeSelector: its pods can land on Windows nodes of any build", winbuild.LabelKey)
	}
	b, err := winbuild.ParseLabel(v)
	if err != nil {
		return fmt.Sprintf("selects %s=%q, which is not a build: %v", winbuild.LabelKey, v, err)
	}
	if b.Compare(winbuild.Version{Major: host.Major, Minor: host.Minor, Build: host.Build}) != 0 {
		return fmt.Sprintf("selects %s nodes, not this node's %s", describeBuild(b), describeBuild(host))
	}
	return ""
}

// ScheduleProblems says what else keeps the class's pods from scheduling
// right on this node: the toleration, a kubernetes.io/os other than windows.
func (rc RuntimeClass) ScheduleProblems() []string {
	var p []string
	if os, ok := rc.NodeSelector[osLabel]; ok && os != "windows" {
		p = append(p, fmt.Sprintf("selects %s=%s", osLabel, os))
	}
	if arch, ok := rc.NodeSelector[archLabel]; ok && arch != runtimeclass.Arch {
		p = append(p, fmt.Sprintf("selects %s=%s; winproc's containerd config registers %s only", archLabel, arch, runtimeclass.Arch))
	}
	if !rc.Tolerates() {
		p = append(p, fmt.Sprintf("lacks the toleration %s in scheduling.tolerations", tolerationText))
	}
	return p
}

func (rc RuntimeClass) label() string {
	name := rc.Name
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Sprintf("RuntimeClass %s (%s)", name, rc.File)
}

// applyFix is how to apply the RuntimeClass for handler on nodes of host's
// build, as package runtimeclass generates it.
func applyFix(handler string, host winbuild.Version) []string {
	fix := []string{fmt.Sprintf("apply the RuntimeClass for this node's build: winproc runtimeclass -handler %s -build %s | kubectl apply -f -", handler, host.Label())}
	if handler == runtimeclass.DefaultHandler && slices.ContainsFunc(runtimeclass.LTSC, func(v winbuild.Version) bool {
		return v.Build == host.Build && v.Major == host.Major && v.Minor == host.Minor
	}) {
		fix = append(fix, fmt.Sprintf("(the same as runtimeclass/manifests/%s.yaml)", runtimeclass.Name(handler, host)))
	}
	return fix
}

// EvaluateRuntimeClasses checks the classes that name handler against a
// node of build host: at least one must select the build, and those that do
// must tolerate the os=windows taint (and not select another OS).
func EvaluateRuntimeClasses(classes []RuntimeClass, files []string, handler string, host winbuild.Version) Result {
	r := Result{Name: CheckRuntimeClass}
	var mine, matching []RuntimeClass
	var others []string
	for _, rc := range classes {
		if rc.Handler == handler {
			mine = append(mine, rc)
		} else {
			others = append(others, fmt.Sprintf("%s has handler %q", rc.label(), rc.Handler))
		}
	}
	apply := applyFix(handler, host)
	if len(mine) == 0 {
		r.Status = Fail
		r.Summary = fmt.Sprintf("no RuntimeClass in %s names handler %q", strings.Join(files, ", "), handler)
		r.Details = others
		r.Fix = apply
		return r
	}
	var problems []issue
	for _, rc := range mine {
		if p := rc.BuildProblem(host); p != "" {
			r.Details = append(r.Details, rc.label()+" "+p)
			continue
		}
		matching = append(matching, rc)
	}
	if len(matching) == 0 {
		fix := apply
		if len(mine) == 1 && mine[0].NodeSelector[winbuild.LabelKey] == "" {
			fix = []string{fmt.Sprintf("add to %s's scheduling.nodeSelector: %s: %q", mine[0].label(), winbuild.LabelKey, host.Label())}
		}
		problems = append(problems, issue{Fail, fmt.Sprintf("no RuntimeClass for handler %q selects this node's build %s (%s=%s)", handler, describeBuild(host), winbuild.LabelKey, host.Label()), fix})
	}
	var good []string
	for _, rc := range matching {
		ps := rc.ScheduleProblems()
		if len(ps) == 0 {
			good = append(good, rc.Name)
			continue
		}
		for _, p := range ps {
			fix := []string{fmt.Sprintf("add to %s's scheduling.tolerations:", rc.label()),
				"  - key: " + taintKey, "    operator: Equal", "    value: " + taintValue, "    effect: " + taintEffect}
			switch {
			case strings.HasPrefix(p, "selects "+osLabel):
				fix = []string{fmt.Sprintf("set %s: windows in %s's scheduling.nodeSelector", osLabel, rc.label())}
			case strings.HasPrefix(p, "selects "+archLabel):
				fix = []string{fmt.Sprintf("set %s: %s in %s's scheduling.nodeSelector", archLabel, runtimeclass.Arch, rc.label())}
			}
			problems = append(problems, issue{Fail, rc.label() + " " + p, fix})
		}
	}
	if len(good) > 0 {
		r.Summary = fmt.Sprintf("RuntimeClass %s (handler %s) selects %s and tolerates %s", strings.Join(good, ", "), handler, describeBuild(host), tolerationText)
	}
	applyIssues(&r, problems)
	return r
}

func (d *run) checkRuntimeClasses() {
	if d.hostErr != nil {
		d.add(Result{Name: CheckRuntimeClass, Status: Fail, Summary: fmt.Sprintf("the host build is unknown: %v", d.hostErr),
			Fix: []string{"pass --host-build with the node's Windows build, e.g. 10.0.20348"}})
		return
	}
	var classes []RuntimeClass
	var problems []issue
	for _, f := range d.o.RuntimeClasses {
		b, err := d.sys.ReadFile(f)
		if err == nil {
			var cs []RuntimeClass
			cs, err = ParseRuntimeClasses(f, b)
			classes = append(classes, cs...)
		}
		if err != nil {
			problems = append(problems, issue{Fail, fmt.Sprintf("%s: %v", f, err), []string{"correct " + f}})
		}
	}
	r := EvaluateRuntimeClasses(classes, d.o.RuntimeClasses, d.o.Handler, d.host)
	applyIssues(&r, problems)
	d.add(r)
}
