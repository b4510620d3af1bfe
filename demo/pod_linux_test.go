//go:build linux

package demo

import "testing"

// crictl ps shows a container's pod and namespace from the labels the
// kubelet sets (containerLabels); without them it shows "unknown".
func TestShowsPod(t *testing.T) {
	const (
		header  = "CONTAINER           IMAGE               CREATED             STATE               NAME                ATTEMPT             POD ID              POD                 NAMESPACE\n"
		labeled = "0123456789ab        example/app:1       1 second ago        Running             app                 0                   ba9876543210        demo                default\n"
		bare    = "0123456789ab        example/app:1       1 second ago        Running             app                 0                   ba9876543210        unknown             unknown\n"
		id      = "0123456789abcdef0123456789abcdef"
	)
	tests := []struct {
		name, ps string
		ok       bool
	}{
		{"labeled", header + labeled, true},
		{"no kubelet labels", header + bare, false},
		{"not listed", header, false},
	}
	for _, tc := range tests {
		if err := showsPod(tc.ps, id); (err == nil) != tc.ok {
			t.Errorf("%s: showsPod = %v; want ok %v", tc.name, err, tc.ok)
		}
	}
	labels := containerLabels("app")
	want := map[string]string{podNameLabel: podName, podNamespaceLabel: "default", podUIDLabel: "uid-" + podName, containerNameLabel: "app"}
	if len(labels) != len(want) {
		t.Errorf("container labels %v; want %v", labels, want)
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("container label %s = %q; want %q", k, labels[k], v)
		}
	}
}
