package hcs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The fault plan speaks the node's stand-ins' fault vocabulary
// (integration/winenode/testdata/standins/faults.h): a line
//
//	<HCS function or notification> <kind> <HRESULT in hex> <count>
//
// sets the same fault on the fake as on the stand-in computecore.dll. The
// fake holds a fault until it clears (inject), whatever the count.

// standinFaults is faults.h, which the stand-ins are built from.
var standinFaults = filepath.Join("..", "..", "integration", "winenode", "testdata", "standins", "faults.h")

// faultKinds are faults.h's kinds, by name, as the fake takes them, from
// the line's HRESULT.
var faultKinds = map[string]func(hr error) fault{
	"call":  func(hr error) fault { return fault{call: hr} },
	"op":    func(hr error) fault { return fault{op: hr} },
	"stall": func(error) fault { return fault{stall: true} },
	// The stand-in completes a deaf operation after 5 s, the fake when
	// the fault clears; both ignore the cancel.
	"deaf": func(hr error) fault { return fault{deaf: true, op: hr} },
	"exit": func(hr error) fault { return fault{exit: true, status: hr, op: hr} },
	"lost": func(error) fault { return fault{lost: true} },
	// The stand-in notifies late by 300 ms, the fake when the fault
	// clears.
	"late":  func(error) fault { return fault{late: true} },
	"twice": func(error) fault { return fault{twice: true} },
	// A create whose operation fails although the process was made: the
	// fake's op fault of createProcess makes the process too.
	"spurious": func(hr error) fault { return fault{op: hr} },
	// A console event whose call lasts until the process exits; the
	// stand-in completes it with the HRESULT, the fake with success.
	"hold": func(error) fault { return fault{hold: true} },
}

// standinOnlyKinds are faults.h's kinds the fake does not take, each with
// why.
var standinOnlyKinds = map[string]string{
	// The fake's systems stop only through its calls, each of which
	// notifies; a stop unannounced is the lost kind of systemExited.
	"gone": "a system stopped without a notification: the fake's lost systemExited",
}

// faultNames are the fake's names of the HCS functions and notifications
// a faults.h line names.
var faultNames = map[string]string{
	"HcsCreateComputeSystem":        "create",
	"HcsOpenComputeSystem":          "open",
	"HcsStartComputeSystem":         "start",
	"HcsShutDownComputeSystem":      "shutdown",
	"HcsTerminateComputeSystem":     "terminate",
	"HcsModifyComputeSystem":        "modify",
	"HcsGetComputeSystemProperties": "properties",
	"HcsEnumerateComputeSystems":    "enumerate",
	"HcsCreateProcess":              "createProcess",
	"HcsOpenProcess":                "openProcess",
	"HcsGetProcessInfo":             "processInfo",
	"HcsGetProcessProperties":       "processProperties",
	"HcsSignalProcess":              "signal",
	"HcsTerminateProcess":           "kill",
	"HcsEventSystemExited":          "systemExited",
	"HcsEventProcessExited":         "processExited",
}

// parseFaultLine reads a faults.h line as the fake's name and fault.
func parseFaultLine(line string) (string, fault, error) {
	f := strings.Fields(line)
	if len(f) != 4 {
		return "", fault{}, fmt.Errorf("fault line %q: want <function> <kind> <HRESULT> <count>", line)
	}
	name, ok := faultNames[f[0]]
	if !ok {
		return "", fault{}, fmt.Errorf("fault line %q: the fake has no name for %s", line, f[0])
	}
	kind, ok := faultKinds[f[1]]
	if !ok {
		return "", fault{}, fmt.Errorf("fault line %q: the fake does not take the kind %s", line, f[1])
	}
	code, err := strconv.ParseUint(f[2], 16, 32)
	if err != nil {
		return "", fault{}, fmt.Errorf("fault line %q: the HRESULT: %w", line, err)
	}
	var hr error
	if code != 0 {
		hr = syscall.Errno(code)
	}
	return name, kind(hr), nil
}

// injectLine sets the fault of a faults.h line on the fake until the test
// ends.
func (a *fakeAPI) injectLine(t *testing.T, line string) (clear func()) {
	t.Helper()
	name, f, err := parseFaultLine(line)
	if err != nil {
		t.Fatal(err)
	}
	return a.inject(t, name, f)
}

// The fake and the stand-ins speak one vocabulary: each kind faults.h
// names is the fake's, or listed with why not, and the fake has no kind
// faults.h does not name.
func TestFaultKindsAgree(t *testing.T) {
	b, err := os.ReadFile(standinFaults)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`standin_fault_kinds\[FAULT_KINDS\] = \{([^}]*)\}`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no standin_fault_kinds", standinFaults)
	}
	var standin []string
	for _, q := range regexp.MustCompile(`"([a-z]+)"`).FindAllSubmatch(m[1], -1) {
		standin = append(standin, string(q[1]))
	}
	if len(standin) < 3 {
		t.Fatalf("standin_fault_kinds lists %v", standin)
	}
	for _, k := range standin {
		_, fake := faultKinds[k]
		_, only := standinOnlyKinds[k]
		if fake == only {
			t.Errorf("faults.h's kind %q: the fake takes it %v, listed as the stand-in's only %v; want one", k, fake, only)
		}
	}
	for k := range faultKinds {
		if !slices.Contains(standin, k) {
			t.Errorf("the fake's kind %q is not faults.h's", k)
		}
	}
	for k := range standinOnlyKinds {
		if !slices.Contains(standin, k) {
			t.Errorf("the stand-in-only kind %q is not faults.h's", k)
		}
	}
}

// Each line of the stand-ins' tests' vocabulary sets the fake's fault of
// the same meaning.
func TestParseFaultLine(t *testing.T) {
	cases := []struct {
		line, name string
		want       fault
		err        bool
	}{
		{"HcsStartComputeSystem op 800705B4 1", "start", fault{op: hrTimeout}, false},
		{"HcsCreateComputeSystem call 8037011E 1", "create", fault{call: hrDisconnect}, false},
		{"HcsTerminateComputeSystem call 80070005 1", "terminate", fault{call: hrAccessDenied}, false},
		{"HcsStartComputeSystem stall 0 1", "start", fault{stall: true}, false},
		{"HcsStartComputeSystem deaf 0 1", "start", fault{deaf: true}, false},
		{"HcsStartComputeSystem exit 80370100 1", "start", fault{exit: true, status: hrTerminatedInBoot, op: hrTerminatedInBoot}, false},
		{"HcsEventSystemExited lost 0 1", "systemExited", fault{lost: true}, false},
		{"HcsEventSystemExited twice 0 1", "systemExited", fault{twice: true}, false},
		{"HcsEventProcessExited late 0 1", "processExited", fault{late: true}, false},
		{"HcsCreateProcess spurious 80070057 1", "createProcess", fault{op: syscall.Errno(0x80070057)}, false},
		{"HcsSignalProcess hold 0 1", "signal", fault{hold: true}, false},
		{"HcsTerminateComputeSystem gone 8037010E 1", "", fault{}, true},
		{"HcsNoSuchFunction call 80004005 1", "", fault{}, true},
		{"HcsStartComputeSystem call zz 1", "", fault{}, true},
		{"HcsStartComputeSystem call", "", fault{}, true},
	}
	for _, tc := range cases {
		name, got, err := parseFaultLine(tc.line)
		if (err != nil) != tc.err || name != tc.name || got != tc.want {
			t.Errorf("parseFaultLine(%q) = %q, %+v, %v; want %q, %+v, error %v", tc.line, name, got, err, tc.name, tc.want, tc.err)
		}
	}
}
