package jobcontainer

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

func TestErrnoFacts(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want errFacts
	}{
		{errorFileNotFound, errFacts{NotExist: true}},
		{errorPathNotFound, errFacts{NotExist: true}},
		{errorNotFound, errFacts{NotExist: true}},
		{errUserNotFound, errFacts{NotExist: true}},
		{errJobExists, errFacts{AlreadyExists: true}},
		{errorAlreadyExists, errFacts{AlreadyExists: true}},
		{nerrUserExists, errFacts{AlreadyExists: true}},
		{errorAccessDenied, errFacts{AccessDenied: true}},
		{syscall.Errno(0x80070005), errFacts{AccessDenied: true}},
		{errorPrivilegeNotHeld, errFacts{AccessDenied: true}},
		{errorNotSupported, errFacts{NotSupported: true}},
		{errorCallNotImplemented, errFacts{NotSupported: true}},
		{errorInvalidFunction, errFacts{NotSupported: true}},
		{errorInvalidParameter, errFacts{InvalidParameter: true}},
		{errorNotReady, errFacts{LayerNotReady: true}},
		{errorDeviceNotConnected, errFacts{LayerNotReady: true}},
		{errorModNotFound, errFacts{ServiceMissing: true}},
		{errorLogonFailure, errFacts{LogonFailure: true}},
		{errors.New("other"), errFacts{}},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("wrapped: %w", tc.err)} {
			if got := errnoFacts(err); got != tc.want {
				t.Errorf("errnoFacts(%v) = %+v, want %+v", err, got, tc.want)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err   error
		class func(error) bool
		fix   string
	}{
		{errorFileNotFound, errdefs.IsNotFound, ""},
		{errJobExists, errdefs.IsAlreadyExists, ""},
		{errorAccessDenied, errdefs.IsPermissionDenied, "SYSTEM or an administrator"},
		{errorCallNotImplemented, func(err error) bool { return errors.Is(err, compute.ErrNotSupported) }, ""},
		{errorModNotFound, errdefs.IsUnavailable, "Containers feature"},
		{errorLogonFailure, errdefs.IsFailedPrecondition, ""},
		// No class: only wrapped.
		{errorDirectory, func(err error) bool {
			return !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) && !errdefs.IsUnavailable(err) && !errdefs.IsInvalidArgument(err)
		}, ""},
	} {
		err := classify("do it", tc.err, errnoFacts(tc.err))
		if !tc.class(err) || !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), "do it: ") || !strings.Contains(err.Error(), tc.fix) {
			t.Errorf("classify(%v) = %v", tc.err, err)
		}
	}
	if classify("x", nil, errFacts{}) != nil {
		t.Error("classify(nil) is not nil")
	}
}
