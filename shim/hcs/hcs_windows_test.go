//go:build windows

package hcs

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/hcn"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/compute"
)

// These tests run the Windows adapter without HCS (none of them needs
// vmcompute.dll), so they also run under Wine.

// jsonMap is v marshalled and read back as a generic document.
func jsonMap(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHCSContainerConfigSameJSON: the hcsshim document the backend hands
// to CreateContainer marshals exactly as the mirror the Linux tests check.
func TestHCSContainerConfigSameJSON(t *testing.T) {
	s := fullSettings()
	c := buildContainerConfig("ctr", s, []layerRef{{ID: "g1", Path: `C:\l1`}, {ID: "g2", Path: `C:\l2`}}, []string{"e1", "e2"})
	c.VolumePath = `\\?\Volume{x}`
	// The always-zero mapped directory fields too.
	c.MappedDirectories[0].BandwidthMaximum, c.MappedDirectories[0].IOPSMaximum, c.MappedDirectories[0].CreateInUtilityVM = 1, 2, true
	c.ProcessorWeight, c.ProcessorMaximum = 3, 4 // every numeric field non-zero
	got, want := jsonMap(t, toHCSContainerConfig(c)), jsonMap(t, c)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hcsshim document differs from the mirror:\n got %v\nwant %v", got, want)
	}
}

func TestHCSProcessConfigSameJSON(t *testing.T) {
	c := &processConfig{
		CommandLine: "a", User: "u", WorkingDirectory: `C:\w`, Environment: map[string]string{"K": "V"},
		EmulateConsole: true, CreateStdInPipe: true, CreateStdOutPipe: true, CreateStdErrPipe: true,
		ConsoleSize: [2]uint{25, 80},
	}
	got, want := jsonMap(t, toHCSProcessConfig(c)), jsonMap(t, c)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hcsshim process document differs:\n got %v\nwant %v", got, want)
	}
}

// TestHCSStatisticsCopied reads the same HCS answer into hcsshim's type
// and the mirror: the copy must equal the mirror.
func TestHCSStatisticsCopied(t *testing.T) {
	var h hcsshim.Statistics
	if err := json.Unmarshal([]byte(hcsStatisticsJSON), &h); err != nil {
		t.Fatal(err)
	}
	var want statistics
	if err := json.Unmarshal([]byte(hcsStatisticsJSON), &want); err != nil {
		t.Fatal(err)
	}
	if got := statisticsFrom(h); !reflect.DeepEqual(got, want) {
		t.Errorf("statisticsFrom:\n got %+v\nwant %+v", got, want)
	}
}

func TestHCSProcessListCopied(t *testing.T) {
	const list = `[{"CreateTimestamp":"2024-05-01T09:00:01Z","ImageName":"cmd.exe","KernelTime100ns":1,"MemoryCommitBytes":2,"MemoryWorkingSetPrivateBytes":3,"MemoryWorkingSetSharedBytes":4,"ProcessId":5,"UserTime100ns":6}]`
	var h []hcsshim.ProcessListItem
	if err := json.Unmarshal([]byte(list), &h); err != nil {
		t.Fatal(err)
	}
	var want []processListItem
	if err := json.Unmarshal([]byte(list), &want); err != nil {
		t.Fatal(err)
	}
	if got := processListFrom(h); !reflect.DeepEqual(got, want) {
		t.Errorf("processListFrom:\n got %+v\nwant %+v", got, want)
	}
}

// TestWindowsFacts reads hcsshim's own error values as its public API
// returns them: wrapped in ContainerError, ProcessError or HcsError, or
// plain, and wrapped again by the backend.
func TestWindowsFacts(t *testing.T) {
	var api windowsAPI
	cases := []struct {
		name  string
		err   error
		check func(errFacts) bool
		class func(error) bool
	}{
		{"container does not exist", &hcsshim.ContainerError{Err: hcsshim.ErrComputeSystemDoesNotExist},
			func(f errFacts) bool { return f.NotExist }, errdefs.IsNotFound},
		{"element not found", &hcsshim.ProcessError{Err: hcsshim.ErrElementNotFound},
			func(f errFacts) bool { return f.NotExist && f.AlreadyStopped }, errdefs.IsNotFound},
		{"already stopped", &hcsshim.ContainerError{Err: hcsshim.ErrVmcomputeAlreadyStopped},
			func(f errFacts) bool { return f.AlreadyStopped }, errdefs.IsNotFound},
		{"pending (Shutdown's success)", &hcsshim.ContainerError{Err: hcsshim.ErrVmcomputeOperationPending, Operation: "hcsshim::ComputeSystem::Shutdown"},
			func(f errFacts) bool { return f.Pending }, nil},
		{"closed", hcsshim.ErrAlreadyClosed,
			func(f errFacts) bool { return f.AlreadyClosed }, errdefs.IsFailedPrecondition},
		{"Wait after Close, first variant", &hcsshim.ContainerError{Err: hcsshim.ErrHandleClose},
			func(f errFacts) bool { return f.AlreadyClosed }, errdefs.IsFailedPrecondition},
		{"Wait after Close of a process", &hcsshim.ProcessError{Err: hcsshim.ErrHandleClose},
			func(f errFacts) bool { return f.AlreadyClosed }, errdefs.IsFailedPrecondition},
		{"timeout", &hcsshim.ContainerError{Err: hcsshim.ErrTimeout},
			func(f errFacts) bool { return f.Timeout }, nil},
		{"invalid state", &hcsshim.ContainerError{Err: hcsshim.ErrVmcomputeOperationInvalidState},
			func(f errFacts) bool { return f.InvalidState }, errdefs.IsFailedPrecondition},
		{"not supported", &hcsshim.ContainerError{Err: hcsshim.ErrVmcomputeInvalidJSON},
			func(f errFacts) bool { return f.NotSupported }, errdefs.IsNotImplemented},
		{"lost the service", &hcsshim.ProcessError{Err: hcsshim.ErrUnexpectedProcessAbort},
			func(f errFacts) bool { return f.Unavailable }, errdefs.IsUnavailable},
		{"layer not ready", &hcsshim.HcsError{Err: syscall.Errno(21)},
			func(f errFacts) bool { return f.LayerNotReady }, nil},
		{"access denied activating a layer", &hcsshim.HcsError{Err: syscall.Errno(5)},
			func(f errFacts) bool { return f.AccessDenied }, errdefs.IsPermissionDenied},
		{"already exists", &hcsshim.ContainerError{Err: syscall.Errno(0x8037010F)},
			func(f errFacts) bool { return f.AlreadyExists }, errdefs.IsAlreadyExists},
		{"namespace not found", hcn.NamespaceNotFoundError{NamespaceID: "x"},
			func(f errFacts) bool { return f.NotExist }, errdefs.IsNotFound},
		{"endpoint not found", hcsshim.EndpointNotFoundError{EndpointName: "x"},
			func(f errFacts) bool { return f.NotExist }, errdefs.IsNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, fmt.Errorf("backend context: %w", tc.err)} {
				f := api.facts(err)
				if !tc.check(f) {
					t.Errorf("facts(%v) = %+v", err, f)
				}
				if tc.class != nil && !tc.class(classify("op", err, f)) {
					t.Errorf("classify(%v) is not of the expected class", err)
				}
			}
		})
	}
	if f := api.facts(nil); f != (errFacts{}) {
		t.Errorf("facts(nil) = %+v", f)
	}
}

// The real backend counts the processors of every group with
// GetActiveProcessorCount(ALL_PROCESSOR_GROUPS), which Wine answers too.
func TestHostCPUsAllGroups(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := int(windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS))
	if got := b.HostCPUs(); got < 1 || got != want {
		t.Errorf("HostCPUs = %d, want GetActiveProcessorCount(ALL_PROCESSOR_GROUPS) = %d", got, want)
	}
}

// A host without the compute service (Wine, or Windows without the
// Containers feature) has no vmcompute.dll: hcsshim's calls fail with
// ERROR_MOD_NOT_FOUND. The backend says how to install the service, and
// Open, which the shim's delete uses, finds no system to clean up.
func TestNoComputeService(t *testing.T) {
	if windows.NewLazySystemDLL("vmcompute.dll").Load() == nil {
		t.Skip("this host has the compute service")
	}
	b, err := New(Options{StateDir: winetest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = b.Open(ctx, "x")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), serviceMissingFix) {
		t.Errorf("Open = %v, want NotFound with the fix", err)
	}
	_, err = b.Create(ctx, "x", &compute.Settings{Layers: compute.Layers{Scratch: `C:\s\x`, Parents: []string{`C:\l\base`}}})
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), serviceMissingFix) {
		t.Errorf("Create = %v, want Unavailable with the fix", err)
	}
}
