//go:build linux

package winenode

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// FaultsEnv runs TestCRIFaults (`make faults` sets it).
const FaultsEnv = "WINPROC_FAULT_PODS"

// criFaults are HCS's failures as the stand-in computecore.dll gives them
// (testdata/standins/faults.h), each met by crictl calls on a container of
// the kubelet's path: crictl.exe, containerd.exe's Windows CRI, the shim,
// the binding.
var criFaults = []struct {
	name   string
	faults string // the stand-in's faults file
	// stop, when set, is the timeout of crictl's stop: the fault meets the
	// stop and removal of a running container (a graceful stop's teardown
	// shuts the system down first, a kill's terminates it at once); else
	// it meets the container's start.
	stop    string
	timeout string   // crictl's deadline for each call
	want    []string // in the first call's error; none: the calls succeed
}{
	{"HCS gives up on a start", "HcsStartComputeSystem op 800705B4 1", "", "",
		[]string{"HcsStartComputeSystem", "0x800705B4", "code = DeadlineExceeded"}},
	{"a start that never ends", "HcsStartComputeSystem stall 0 1", "", "10s",
		[]string{"code = DeadlineExceeded"}},
	{"the service disconnects on a create", "HcsCreateComputeSystem call 8037011E 1", "", "",
		[]string{"HcsCreateComputeSystem", "0x8037011E", "code = Unavailable"}},
	{"access denied on a create", "HcsCreateComputeSystem call 80070005 1", "", "",
		[]string{"HcsCreateComputeSystem", "0x80070005", "code = PermissionDenied"}},
	// The removal succeeds: the terminate is carried on in the background,
	// and the end of the test finds no container process left.
	{"the shutdown and the terminate refused on a graceful stop", "HcsShutDownComputeSystem call 80070005 1\nHcsTerminateComputeSystem call 80070005 1", "10", "", nil},
	{"the terminate refused on a kill", "HcsTerminateComputeSystem call 80070005 1", "0", "", nil},
}

// TestCRIFaults meets each fault with crictl calls on the Windows node:
// each call returns by its deadline, a failed one with an error that names
// the HCS function and the HRESULT, in the gRPC class the kubelet reads;
// once the fault is gone the container is removed, the next one runs, and
// nothing is left once the pod goes.
func TestCRIFaults(t *testing.T) {
	if os.Getenv(FaultsEnv) == "" {
		t.Skipf("%s is not set: run `make faults`", FaultsEnv)
	}
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "shim", DefaultHandler: true})
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	logs := t.TempDir()
	pod := criJSON(t, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "faults", "namespace": "default", "uid": "uid-faults"},
		"log_directory": WindowsPath(logs),
	})
	id := criRun(t, n, "runp", pod)
	faults := n.Path(`C:\ProgramData\winproc-standins\faults`)
	t.Cleanup(func() { os.Remove(faults) })
	for i, tc := range criFaults {
		t.Run(tc.name, func(t *testing.T) {
			c := criCreatePod(t, n, id, pod, fmt.Sprintf("c%d", i), nil, `C:\winproc-testapp.exe`, "sleep", "-seconds", "0")
			calls := [][]string{{"start", c}}
			if tc.stop != "" {
				criRun(t, n, "start", c)
				calls = [][]string{{"stop", "--timeout", tc.stop, c}, {"rm", c}}
			}
			if err := os.WriteFile(faults, []byte(tc.faults+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			failed := faultedCalls(t, n, tc.timeout, calls, tc.want)
			// The stand-in takes each fault as a call meets it.
			if b, err := os.ReadFile(faults); err != nil || strings.TrimSpace(string(b)) != "" {
				t.Errorf("faults not met by the calls: %q, %v", b, err)
			}
			if err := os.Remove(faults); err != nil {
				t.Fatal(err)
			}
			if failed {
				removeAfterFault(t, n, c)
			}
			// The next container of the pod runs.
			next := criCreatePod(t, n, id, pod, fmt.Sprintf("next%d", i), nil, `C:\winproc-testapp.exe`, "exit", "0")
			criRun(t, n, "start", next)
			waitFor(t, "the next container's exit", func() bool { return strings.Contains(criRun(t, n, "inspect", next), "CONTAINER_EXITED") })
			criRun(t, n, "rm", next)
		})
	}
	criRun(t, n, "stopp", id)
	criRun(t, n, "rmp", id)
	n.checkNothingLeft()
}

// faultedCalls runs crictl's calls under the fault, each with the
// deadline timeout, and checks them: the first fails with want in its
// error, or, with no want, every call succeeds. It reports whether a call
// failed.
func faultedCalls(t *testing.T, n *Node, timeout string, calls [][]string, want []string) (failed bool) {
	t.Helper()
	for k, call := range calls {
		args := call
		if timeout != "" {
			args = append([]string{"--timeout", timeout}, call...)
		}
		start := time.Now()
		out, errOut, err := n.Crictl(args...)
		took := time.Since(start)
		t.Logf("crictl %s: %v after %v\n%s%s", call[0], err, took.Round(10*time.Millisecond), out, errOut)
		if deadline := crictlDeadline(timeout); took > deadline+5*time.Second {
			t.Errorf("crictl %s returned after %v, past its deadline %v", call[0], took, deadline)
		}
		switch {
		case len(want) == 0 && err != nil:
			t.Errorf("crictl %s: %v\n%s", call[0], err, errOut)
		case k == 0 && len(want) > 0:
			for _, w := range want {
				if err == nil || !strings.Contains(errOut, w) {
					t.Errorf("crictl %s: %v, %q; want an error with %q", call[0], err, errOut, w)
				}
			}
		}
		failed = failed || err != nil
	}
	return failed
}

// crictlDeadline is the deadline a crictl call of timeout ("" for the
// node's default) has.
func crictlDeadline(timeout string) time.Duration {
	if d, err := time.ParseDuration(timeout); err == nil {
		return d
	}
	return 2 * time.Minute
}

// removeAfterFault stops and removes container c once the fault is gone,
// retrying as the kubelet does, and logs how long it took.
func removeAfterFault(t *testing.T, n *Node, c string) {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < 30*time.Second {
		_, e1, err1 := n.Crictl("stop", "--timeout", "0", c)
		_, e2, err2 := n.Crictl("rm", c)
		if err1 == nil && err2 == nil {
			t.Logf("container %s removed %v after the fault cleared", c, time.Since(start).Round(10*time.Millisecond))
			return
		}
		last = e1 + e2
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("container %s not removable 30 s after the fault cleared: %s", c, last)
}
