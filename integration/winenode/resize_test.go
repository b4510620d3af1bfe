//go:build linux

package winenode

import (
	"encoding/json"
	"strings"
)

// resize checks in-place resize through containerd.exe's own Windows CRI
// (crictl.exe update, then inspect), after the memory limit was set to
// 256 MiB: crictl inspect shows it; a CPU maximum applies where the
// backend takes it (the HCS stand-in accepts every modify) and is refused
// where the host has no CPU rate control (Wine's job objects, for a
// HostProcess container): FailedPrecondition naming cpu_maximum, and
// crictl inspect shows the limits as they were.
func (p *podRun) resize(id string, cpuRateControl bool) {
	t, n := p.t, p.n
	t.Helper()
	const memory = "268435456"
	if w := inspectWindowsResources(p, id); w.MemoryLimitInBytes != memory {
		t.Errorf("crictl inspect after update --memory: %+v, want memory %s", w, memory)
	}
	_, errOut, err := n.Crictl("update", "--cpu-maximum", "5000", id)
	w := inspectWindowsResources(p, id)
	switch {
	case cpuRateControl:
		if err != nil || w.CPUMaximum != "5000" || w.MemoryLimitInBytes != memory {
			t.Errorf("update --cpu-maximum 5000: %v, %s; crictl inspect %+v", err, errOut, w)
		}
	case err == nil || !strings.Contains(errOut, "code = FailedPrecondition") || !strings.Contains(errOut, "cpu_maximum (5000) cannot change on this host"):
		t.Errorf("update --cpu-maximum 5000 on job objects without CPU rate control: %v\n%s; want FailedPrecondition naming cpu_maximum", err, errOut)
	case (w.CPUMaximum != "" && w.CPUMaximum != "0") || w.MemoryLimitInBytes != memory:
		t.Errorf("crictl inspect after a refused update: %+v, want the limits as they were", w)
	}
}

// windowsResources are a container's Windows limits as crictl inspect
// shows them (protobuf JSON: 64-bit numbers as strings, "0" for none).
type windowsResources struct {
	CPUMaximum         string `json:"cpuMaximum"`
	MemoryLimitInBytes string `json:"memoryLimitInBytes"`
}

func inspectWindowsResources(p *podRun, id string) windowsResources {
	p.t.Helper()
	out := criRun(p.t, p.n, "inspect", "-o", "json", id)
	var v struct {
		Status struct {
			Resources struct{ Windows windowsResources }
		}
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &v); err != nil {
		p.t.Fatalf("crictl inspect %s: %v\n%s", id, err, out)
	}
	return v.Status.Resources.Windows
}
