package containerdconn

import (
	"runtime"
	"testing"
)

func TestTarget(t *testing.T) {
	tests := []struct {
		goos, address, want string
	}{
		{"linux", "/run/containerd/containerd.sock", "passthrough:///unix:///run/containerd/containerd.sock"},
		{"windows", `\\.\pipe\containerd-containerd`, "passthrough:///npipe:////./pipe/containerd-containerd"},
		{"windows", "npipe:////./pipe/containerd-containerd", "passthrough:///npipe:////./pipe/containerd-containerd"},
	}
	for _, tt := range tests {
		if tt.goos != runtime.GOOS {
			continue
		}
		if got := Target(tt.address); got != tt.want {
			t.Errorf("Target(%q) = %q, want %q", tt.address, got, tt.want)
		}
	}
}
