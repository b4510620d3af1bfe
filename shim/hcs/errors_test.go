package hcs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

func TestErrnoFacts(t *testing.T) {
	cases := []struct {
		code syscall.Errno
		want errFacts
	}{
		{0xC037010E, errFacts{NotExist: true}},                  // hcsshim's ErrComputeSystemDoesNotExist
		{0x8037010E, errFacts{NotExist: true}},                  // HCS_E_SYSTEM_NOT_FOUND
		{0x490, errFacts{NotExist: true, AlreadyStopped: true}}, // ERROR_NOT_FOUND, hcsshim's ErrElementNotFound
		{0xC0370110, errFacts{AlreadyStopped: true}},            // ErrVmcomputeAlreadyStopped
		{0x80370110, errFacts{AlreadyStopped: true}},            // ErrVmcomputeSystemAlreadyStopped
		{0x8037011F, errFacts{AlreadyStopped: true}},            // ErrProcessAlreadyStopped
		{0x8037010F, errFacts{AlreadyExists: true}},             // HCS_E_SYSTEM_ALREADY_EXISTS
		{0xC037010F, errFacts{AlreadyExists: true}},             // the same, NTSTATUS style
		{0xC0370103, errFacts{Pending: true}},                   // ErrVmcomputeOperationPending
		{0x80370117, errFacts{Pending: true}},                   // HCS_E_OPERATION_PENDING (winerror.h)
		{0xC0370105, errFacts{InvalidState: true}},              // ErrVmcomputeOperationInvalidState
		{0x80370118, errFacts{Timeout: true}},                   // HCS_E_OPERATION_TIMEOUT
		{0x800705B4, errFacts{Timeout: true}},                   // ERROR_TIMEOUT as an HRESULT: a hung operation
		{0x5B4, errFacts{Timeout: true}},                        // ERROR_TIMEOUT
		{0xC037010D, errFacts{NotSupported: true}},              // ErrVmcomputeInvalidJSON
		{0xC037010B, errFacts{NotSupported: true}},              // ErrVmcomputeUnknownMessage
		{0xD, errFacts{NotSupported: true}},                     // ErrInvalidData
		{0x32, errFacts{NotSupported: true}},                    // ErrNotSupported
		{5, errFacts{AccessDenied: true}},                       // ERROR_ACCESS_DENIED
		{0x8037011B, errFacts{AccessDenied: true}},              // HCS_E_ACCESS_DENIED
		{0x80370101, errFacts{ImageMismatch: true}},             // HCS_E_IMAGE_MISMATCH
		{6, errFacts{InvalidHandle: true}},                      // ERROR_INVALID_HANDLE
		{0x8037011E, errFacts{Unavailable: true}},               // HCS_E_SERVICE_DISCONNECT
		{0x8037010A, errFacts{Unavailable: true}},               // HCS_E_CONNECTION_CLOSED
		{0x80370114, errFacts{Unavailable: true}},               // HCS_E_SERVICE_NOT_AVAILABLE
		{1722, errFacts{Unavailable: true}},                     // RPC_S_SERVER_UNAVAILABLE
		{0x800706BA, errFacts{Unavailable: true}},               // its HRESULT
		{21, errFacts{LayerNotReady: true}},                     // ERROR_NOT_READY
		{1167, errFacts{LayerNotReady: true}},                   // ERROR_DEVICE_NOT_CONNECTED
		{126, errFacts{ServiceMissing: true}},                   // ERROR_MOD_NOT_FOUND: no computecore.dll
		{127, errFacts{ServiceMissing: true}},                   // ERROR_PROC_NOT_FOUND: an older computecore.dll
		{2, errFacts{}},                                         // ERROR_FILE_NOT_FOUND: no meaning of its own
		{0x80370100, errFacts{}},                                // HCS_E_TERMINATED_DURING_START
		{0x8037F10E, errFacts{}},                                // not an HCS code
	}
	for _, tc := range cases {
		for _, err := range []error{tc.code, fmt.Errorf("wrapped: %w", tc.code)} {
			if got := errnoFacts(err); got != tc.want {
				t.Errorf("errnoFacts(%#x) = %+v, want %+v", uint32(tc.code), got, tc.want)
			}
		}
	}
	if got := errnoFacts(errors.New("no code")); got != (errFacts{}) {
		t.Errorf("an error without a code has facts %+v", got)
	}
	if got := errnoFacts(nil); got != (errFacts{}) {
		t.Errorf("nil has facts %+v", got)
	}
}

func TestClassOf(t *testing.T) {
	cases := []struct {
		name  string
		facts errFacts
		is    func(error) bool
	}{
		{"already exists", errFacts{AlreadyExists: true}, errdefs.IsAlreadyExists},
		{"not exist", errFacts{NotExist: true}, errdefs.IsNotFound},
		{"already stopped", errFacts{AlreadyStopped: true}, errdefs.IsNotFound},
		{"element not found is both", errFacts{NotExist: true, AlreadyStopped: true}, errdefs.IsNotFound},
		{"closed", errFacts{AlreadyClosed: true}, errdefs.IsFailedPrecondition},
		{"timeout", errFacts{Timeout: true}, errdefs.IsDeadlineExceeded},
		{"not supported", errFacts{NotSupported: true}, func(err error) bool { return errors.Is(err, compute.ErrNotSupported) && errdefs.IsNotImplemented(err) }},
		{"invalid state", errFacts{InvalidState: true}, errdefs.IsFailedPrecondition},
		{"image mismatch", errFacts{ImageMismatch: true}, errdefs.IsFailedPrecondition},
		{"access denied", errFacts{AccessDenied: true}, errdefs.IsPermissionDenied},
		{"unavailable", errFacts{Unavailable: true}, errdefs.IsUnavailable},
		{"pending", errFacts{Pending: true}, errdefs.IsUnavailable},
		{"invalid handle", errFacts{InvalidHandle: true}, errdefs.IsUnavailable},
		{"no compute service", errFacts{ServiceMissing: true}, errdefs.IsUnavailable},
		{"not found wins over invalid state", errFacts{NotExist: true, InvalidState: true}, errdefs.IsNotFound},
		{"exists wins over not found", errFacts{AlreadyExists: true, NotExist: true}, errdefs.IsAlreadyExists},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := classOf(tc.facts)
			if class == nil || !tc.is(class) {
				t.Fatalf("classOf(%+v) = %v", tc.facts, class)
			}
		})
	}
	for _, f := range []errFacts{{}, {LayerNotReady: true}} {
		if class := classOf(f); class != nil {
			t.Errorf("classOf(%+v) = %v, want none", f, class)
		}
	}
}

func TestClassify(t *testing.T) {
	hcsErr := fmt.Errorf("hcs::System::Start ctr: %w", syscall.Errno(0xC037010E))
	err := classify("start compute system ctr", hcsErr, errnoFacts(hcsErr))
	if !errdefs.IsNotFound(err) {
		t.Errorf("%v is not NotFound", err)
	}
	if !errors.Is(err, hcsErr) || !errors.Is(err, syscall.Errno(0xC037010E)) {
		t.Errorf("%v lost hcsshim's error", err)
	}
	if want := "start compute system ctr: hcs::System::Start ctr: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("message %q", err)
	}

	// No compute service: the message says how to install it.
	missing := fmt.Errorf("hcs::CreateComputeSystem ctr: %w", syscall.Errno(126))
	err = classify("create compute system ctr", missing, errnoFacts(missing))
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "Install-WindowsFeature -Name Containers") {
		t.Errorf("no compute service: %v", err)
	}

	plain := errors.New("something else")
	err = classify("do it", plain, errFacts{})
	if err.Error() != "do it: something else" || !errors.Is(err, plain) {
		t.Errorf("unclassified: %v", err)
	}
	for _, is := range []func(error) bool{errdefs.IsNotFound, errdefs.IsFailedPrecondition, errdefs.IsUnavailable, errdefs.IsInvalidArgument, errdefs.IsNotImplemented} {
		if is(err) {
			t.Errorf("an unknown error got a class: %v", err)
		}
	}
	if classify("x", nil, errFacts{NotExist: true}) != nil {
		t.Error("classify(nil) is not nil")
	}
	if !errors.Is(classify("x", plain, errFacts{Timeout: true}), context.DeadlineExceeded) {
		t.Error("timeout is not DeadlineExceeded")
	}
}

func TestGoneWhileQuerying(t *testing.T) {
	for _, tc := range []struct {
		f    errFacts
		gone bool
	}{
		{errFacts{NotExist: true}, true},
		{errFacts{AlreadyStopped: true}, true},
		{errFacts{InvalidState: true}, true},
		{errFacts{AccessDenied: true}, true},
		{errFacts{InvalidHandle: true}, true},
		{errFacts{Timeout: true}, false},
		{errFacts{}, false},
	} {
		if got := goneWhileQuerying(tc.f); got != tc.gone {
			t.Errorf("goneWhileQuerying(%+v) = %v", tc.f, got)
		}
	}
}

func TestFactsOr(t *testing.T) {
	a := errFacts{NotExist: true, Pending: true, ImageMismatch: true}
	b := errFacts{AlreadyStopped: true, Pending: true, LayerNotReady: true, Unavailable: true}
	want := errFacts{NotExist: true, AlreadyStopped: true, Pending: true, ImageMismatch: true, LayerNotReady: true, Unavailable: true}
	if got := a.or(b); got != want {
		t.Errorf("or = %+v", got)
	}
	// Every field takes part: setting each alone survives or.
	all := errFacts{true, true, true, true, true, true, true, true, true, true, true, true, true, true}
	if got := all.or(errFacts{}); got != all {
		t.Errorf("or drops a field: %+v", got)
	}
	if got := (errFacts{}).or(all); got != all {
		t.Errorf("or drops a field of its argument: %+v", got)
	}
}
