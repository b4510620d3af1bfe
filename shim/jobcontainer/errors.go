package jobcontainer

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// errFacts is what a Windows error means to the backend, as plain flags;
// classify turns them into errdefs classes. On Windows, the host reads the
// Windows error inside hcsshim's layer errors first.
type errFacts struct {
	// NotExist: the file, job, process or user is not there
	// (ERROR_FILE_NOT_FOUND, ERROR_PATH_NOT_FOUND, ERROR_NOT_FOUND,
	// ERROR_INVALID_NAME for a job object's name, errUserNotFound).
	NotExist bool
	// AlreadyExists: ERROR_ALREADY_EXISTS, NERR_UserExists, errJobExists.
	AlreadyExists bool
	// AccessDenied: ERROR_ACCESS_DENIED, ERROR_PRIVILEGE_NOT_HELD.
	AccessDenied bool
	// NotSupported: the host does not implement the call or the
	// information class (ERROR_NOT_SUPPORTED, ERROR_CALL_NOT_IMPLEMENTED,
	// ERROR_INVALID_FUNCTION).
	NotSupported bool
	// InvalidParameter: ERROR_INVALID_PARAMETER, what a host without CPU
	// rate control or group affinity for jobs answers; read by the caller.
	InvalidParameter bool
	// LayerNotReady: ERROR_NOT_READY or ERROR_DEVICE_NOT_CONNECTED from a
	// layer function, which hcsshim retries.
	LayerNotReady bool
	// ServiceMissing: ERROR_MOD_NOT_FOUND or ERROR_PROC_NOT_FOUND: a DLL
	// the backend needs is not on this host (vmcompute.dll without the
	// Containers feature).
	ServiceMissing bool
	// LogonFailure: ERROR_LOGON_FAILURE, ERROR_ACCOUNT_RESTRICTION: the
	// account cannot log on as asked (a password is needed).
	LogonFailure bool
}

func (f errFacts) or(g errFacts) errFacts {
	return errFacts{
		NotExist:         f.NotExist || g.NotExist,
		AlreadyExists:    f.AlreadyExists || g.AlreadyExists,
		AccessDenied:     f.AccessDenied || g.AccessDenied,
		NotSupported:     f.NotSupported || g.NotSupported,
		InvalidParameter: f.InvalidParameter || g.InvalidParameter,
		LayerNotReady:    f.LayerNotReady || g.LayerNotReady,
		ServiceMissing:   f.ServiceMissing || g.ServiceMissing,
		LogonFailure:     f.LogonFailure || g.LogonFailure,
	}
}

// Windows error codes.
const (
	errorInvalidFunction    = syscall.Errno(1)
	errorFileNotFound       = syscall.Errno(2)
	errorPathNotFound       = syscall.Errno(3)
	errorAccessDenied       = syscall.Errno(5)
	errorNotReady           = syscall.Errno(21)
	errorNotSupported       = syscall.Errno(50)
	errorInvalidParameter   = syscall.Errno(87)
	errorCallNotImplemented = syscall.Errno(120)
	errorInvalidName        = syscall.Errno(123)
	errorModNotFound        = syscall.Errno(126)
	errorProcNotFound       = syscall.Errno(127)
	errorAlreadyExists      = syscall.Errno(183)
	errorDirectory          = syscall.Errno(267)
	errorPrivilegeNotHeld   = syscall.Errno(1314)
	errorDeviceNotConnected = syscall.Errno(1167)
	errorNotFound           = syscall.Errno(1168)
	errorLogonFailure       = syscall.Errno(1326)
	errorAccountRestriction = syscall.Errno(1327)
	errorNotAReparsePoint   = syscall.Errno(4390)
	nerrUserExists          = syscall.Errno(2224) // NERR_UserExists
)

// errnoFacts reads the Windows error at the bottom of err, and the
// binding's own errors.
func errnoFacts(err error) errFacts {
	var f errFacts
	switch {
	case errors.Is(err, errJobExists):
		f.AlreadyExists = true
	case errors.Is(err, errUserNotFound):
		f.NotExist = true
	}
	var e syscall.Errno
	if !errors.As(err, &e) {
		return f
	}
	// Windows errors sometimes arrive as HRESULTs (HRESULT_FROM_WIN32).
	if uint32(e)&0xFFFF0000 == 0x80070000 {
		e = syscall.Errno(uint32(e) & 0xFFFF)
	}
	switch e {
	case errorFileNotFound, errorPathNotFound, errorNotFound, errorInvalidName:
		f.NotExist = true
	case errorAlreadyExists, nerrUserExists:
		f.AlreadyExists = true
	case errorAccessDenied, errorPrivilegeNotHeld:
		f.AccessDenied = true
	case errorNotSupported, errorCallNotImplemented, errorInvalidFunction:
		f.NotSupported = true
	case errorInvalidParameter:
		f.InvalidParameter = true
	case errorNotReady, errorDeviceNotConnected:
		f.LayerNotReady = true
	case errorModNotFound, errorProcNotFound:
		f.ServiceMissing = true
	case errorLogonFailure, errorAccountRestriction:
		f.LogonFailure = true
	}
	return f
}

// classify wraps err, what failed, with what it means as an errdefs class,
// so containerd reports a useful gRPC code; the Windows error stays in the
// chain and the message. An error with no known meaning is only wrapped.
func classify(what string, err error, f errFacts) error {
	if err == nil {
		return nil
	}
	switch {
	case f.AlreadyExists:
		return fmt.Errorf("%s: %w: %w", what, err, errdefs.ErrAlreadyExists)
	case f.NotExist:
		return fmt.Errorf("%s: %w: %w", what, err, errdefs.ErrNotFound)
	case f.AccessDenied:
		return fmt.Errorf("%s: %w: %w: the shim must run as SYSTEM or an administrator (containerd's service does)", what, err, errdefs.ErrPermissionDenied)
	case f.NotSupported:
		return fmt.Errorf("%s: %w: %w", what, err, compute.ErrNotSupported)
	case f.ServiceMissing:
		return fmt.Errorf("%s: %w: %w: %s", what, err, errdefs.ErrUnavailable, serviceMissingFix)
	case f.LogonFailure:
		return fmt.Errorf("%s: %w: %w", what, err, errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// serviceMissingFix says what to do about ServiceMissing: the layer
// functions are in vmcompute.dll.
const serviceMissingFix = "the container layer functions (vmcompute.dll) are not installed on this host; " +
	"install the Containers feature (Install-WindowsFeature -Name Containers, or " +
	"Enable-WindowsOptionalFeature -Online -FeatureName Containers) and restart"

// invalid is an errdefs.ErrInvalidArgument error.
func invalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}

// notSupported is a compute.ErrNotSupported error.
func notSupported(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), compute.ErrNotSupported)
}
