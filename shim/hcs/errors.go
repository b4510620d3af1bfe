package hcs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// errFacts is what an hcsshim error says, as plain flags. On Windows,
// windowsAPI.facts fills them from hcsshim's predicates (IsNotExist,
// IsAlreadyStopped, IsPending, ...) and from the error codes below;
// classify turns them into errdefs classes. Keeping the decision here, away
// from hcsshim's types, lets it be tested on Linux.
type errFacts struct {
	// NotExist: the compute system or process does not exist
	// (hcsshim.IsNotExist, HCS_E_SYSTEM_NOT_FOUND, ERROR_NOT_FOUND).
	NotExist bool
	// AlreadyStopped: the system or process has already stopped
	// (hcsshim.IsAlreadyStopped, HCS_E_SYSTEM_ALREADY_STOPPED,
	// HCS_E_PROCESS_ALREADY_STOPPED).
	AlreadyStopped bool
	// AlreadyClosed: the handle was closed by Close
	// (hcsshim.IsAlreadyClosed, or hcsshim.ErrHandleClose, which a Wait
	// racing with Close returns as well).
	AlreadyClosed bool
	// Pending: the operation continues in the background
	// (hcsshim.IsPending, ErrVmcomputeOperationPending; computecore.dll
	// answers HCS_E_OPERATION_PENDING).
	Pending bool
	// Timeout: hcsshim gave up waiting for HCS (hcsshim.IsTimeout,
	// HCS_E_OPERATION_TIMEOUT), or HCS gave up itself (ERROR_TIMEOUT, the
	// HRESULT 0x800705B4 users see from a hung operation).
	Timeout bool
	// NotSupported: HCS does not understand or support the request
	// (hcsshim.IsNotSupported).
	NotSupported bool
	// InvalidState: not valid in the system's current state
	// (hcsshim.IsOperationInvalidState, HCS_E_INVALID_STATE).
	InvalidState bool
	// AccessDenied: ERROR_ACCESS_DENIED or HCS_E_ACCESS_DENIED
	// (hcsshim.IsAccessIsDenied).
	AccessDenied bool
	// AlreadyExists: HCS_E_SYSTEM_ALREADY_EXISTS, which hcsshim does not
	// name.
	AlreadyExists bool
	// ImageMismatch: HCS_E_IMAGE_MISMATCH, the image's Windows build
	// cannot run on this host.
	ImageMismatch bool
	// InvalidHandle: ERROR_INVALID_HANDLE, seen when querying a system that
	// is being torn down.
	InvalidHandle bool
	// Unavailable: the compute service is unreachable or lost
	// (hcsshim.ErrUnexpectedProcessAbort, HCS_E_SERVICE_DISCONNECT,
	// HCS_E_CONNECTION_CLOSED, HCS_E_SERVICE_NOT_AVAILABLE,
	// RPC_S_SERVER_UNAVAILABLE).
	Unavailable bool
	// LayerNotReady: ERROR_NOT_READY or ERROR_DEVICE_NOT_CONNECTED from a
	// layer call, which hcsshim itself retries (loopback VHDs on RS5 under
	// load).
	LayerNotReady bool
	// ServiceMissing: ERROR_MOD_NOT_FOUND or ERROR_PROC_NOT_FOUND, what
	// loading computecore.dll (or vmcompute.dll, for hcsshim's layer
	// functions) fails with: the host has no Containers feature, so no
	// compute system exists on it.
	ServiceMissing bool
}

func (f errFacts) or(g errFacts) errFacts {
	return errFacts{
		NotExist:       f.NotExist || g.NotExist,
		AlreadyStopped: f.AlreadyStopped || g.AlreadyStopped,
		AlreadyClosed:  f.AlreadyClosed || g.AlreadyClosed,
		Pending:        f.Pending || g.Pending,
		Timeout:        f.Timeout || g.Timeout,
		NotSupported:   f.NotSupported || g.NotSupported,
		InvalidState:   f.InvalidState || g.InvalidState,
		AccessDenied:   f.AccessDenied || g.AccessDenied,
		AlreadyExists:  f.AlreadyExists || g.AlreadyExists,
		ImageMismatch:  f.ImageMismatch || g.ImageMismatch,
		InvalidHandle:  f.InvalidHandle || g.InvalidHandle,
		Unavailable:    f.Unavailable || g.Unavailable,
		LayerNotReady:  f.LayerNotReady || g.LayerNotReady,
		ServiceMissing: f.ServiceMissing || g.ServiceMissing,
	}
}

// Windows and HCS error codes. HCS reports its own codes either as the
// HRESULT (0x8037xxxx) or with the NTSTATUS-style severity (0xC037xxxx);
// hcsshim's own constants use both, so both are listed.
const (
	errorAccessDenied       = syscall.Errno(5)          // ERROR_ACCESS_DENIED
	errorInvalidHandle      = syscall.Errno(6)          // ERROR_INVALID_HANDLE
	errorInvalidData        = syscall.Errno(13)         // ERROR_INVALID_DATA
	errorNotReady           = syscall.Errno(21)         // ERROR_NOT_READY
	errorNotSupported       = syscall.Errno(50)         // ERROR_NOT_SUPPORTED
	errorModNotFound        = syscall.Errno(126)        // ERROR_MOD_NOT_FOUND
	errorProcNotFound       = syscall.Errno(127)        // ERROR_PROC_NOT_FOUND
	errorTimeout            = syscall.Errno(1460)       // ERROR_TIMEOUT (0x5B4)
	errorNotFound           = syscall.Errno(1168)       // ERROR_NOT_FOUND (0x490)
	errorDeviceNotConnected = syscall.Errno(1167)       // ERROR_DEVICE_NOT_CONNECTED
	rpcServerUnavailable    = syscall.Errno(1722)       // RPC_S_SERVER_UNAVAILABLE
	rpcServerUnavailableHR  = syscall.Errno(0x800706BA) // the same as an HRESULT

	hcsImageMismatch        = 0x0101 // HCS_E_IMAGE_MISMATCH
	hcsInvalidState         = 0x0105 // HCS_E_INVALID_STATE
	hcsConnectionClosed     = 0x010A // HCS_E_CONNECTION_CLOSED
	hcsUnknownMessage       = 0x010B // HCS_E_UNKNOWN_MESSAGE
	hcsInvalidJSON          = 0x010D // HCS_E_INVALID_JSON
	hcsSystemNotFound       = 0x010E // HCS_E_SYSTEM_NOT_FOUND
	hcsSystemAlreadyExists  = 0x010F // HCS_E_SYSTEM_ALREADY_EXISTS
	hcsSystemAlreadyStopped = 0x0110 // HCS_E_SYSTEM_ALREADY_STOPPED
	hcsServiceNotAvailable  = 0x0114 // HCS_E_SERVICE_NOT_AVAILABLE
	hcsVmcomputePending     = 0x0103 // hcsshim's ErrVmcomputeOperationPending (vmcompute.dll's status)
	hcsOperationPending     = 0x0117 // HCS_E_OPERATION_PENDING (winerror.h; computecore.dll's)
	hcsOperationTimeout     = 0x0118 // HCS_E_OPERATION_TIMEOUT
	hcsAccessDenied         = 0x011B // HCS_E_ACCESS_DENIED
	hcsServiceDisconnect    = 0x011E // HCS_E_SERVICE_DISCONNECT
	hcsProcessAlreadyStop   = 0x011F // HCS_E_PROCESS_ALREADY_STOPPED
)

// hcsCode reports whether e is the HCS code low (0x0100..0x01FF) with either
// severity prefix.
func hcsCode(e syscall.Errno, low uint32) bool {
	return uint32(e) == 0x80370000|low || uint32(e) == 0xC0370000|low
}

// errnoFacts reads the Windows error code at the bottom of err. The
// Windows side first unwraps hcsshim's ContainerError, ProcessError and
// HcsError, which have no Unwrap method.
func errnoFacts(err error) errFacts {
	var e syscall.Errno
	if !errors.As(err, &e) {
		return errFacts{}
	}
	// HCS answers Windows errors as HRESULTs (HRESULT_FROM_WIN32).
	if uint32(e)&0xFFFF0000 == 0x80070000 {
		e = syscall.Errno(uint32(e) & 0xFFFF)
	}
	var f errFacts
	switch {
	case hcsCode(e, hcsSystemNotFound), e == errorNotFound:
		f.NotExist = true
		// hcsshim counts ERROR_NOT_FOUND as both: a process that has
		// exited is no longer found.
		f.AlreadyStopped = e == errorNotFound
	case hcsCode(e, hcsSystemAlreadyStopped), hcsCode(e, hcsProcessAlreadyStop):
		f.AlreadyStopped = true
	case hcsCode(e, hcsSystemAlreadyExists):
		f.AlreadyExists = true
	case hcsCode(e, hcsOperationPending), hcsCode(e, hcsVmcomputePending):
		f.Pending = true
	case hcsCode(e, hcsInvalidState):
		f.InvalidState = true
	case hcsCode(e, hcsOperationTimeout), e == errorTimeout:
		f.Timeout = true
	case hcsCode(e, hcsInvalidJSON), hcsCode(e, hcsUnknownMessage), e == errorInvalidData, e == errorNotSupported:
		f.NotSupported = true
	case hcsCode(e, hcsAccessDenied), e == errorAccessDenied:
		f.AccessDenied = true
	case hcsCode(e, hcsImageMismatch):
		f.ImageMismatch = true
	case e == errorInvalidHandle:
		f.InvalidHandle = true
	case hcsCode(e, hcsServiceDisconnect), hcsCode(e, hcsConnectionClosed), hcsCode(e, hcsServiceNotAvailable),
		e == rpcServerUnavailable, e == rpcServerUnavailableHR:
		f.Unavailable = true
	case e == errorNotReady, e == errorDeviceNotConnected:
		f.LayerNotReady = true
	case e == errorModNotFound, e == errorProcNotFound:
		f.ServiceMissing = true
	}
	return f
}

// classify wraps err, what failed, with what it means as an errdefs class,
// so containerd reports a useful gRPC code. The hcsshim error stays in the
// chain and in the message. An error with no known meaning is only wrapped.
func classify(what string, err error, f errFacts) error {
	if err == nil {
		return nil
	}
	class := classOf(f)
	switch {
	case class == nil:
		return fmt.Errorf("%s: %w", what, err)
	case f.ServiceMissing:
		return fmt.Errorf("%s: %w: %w: %s", what, err, class, serviceMissingFix)
	}
	return fmt.Errorf("%s: %w: %w", what, err, class)
}

// serviceMissingFix says what to do about ServiceMissing.
const serviceMissingFix = "the Host Compute Service is not installed on this host (computecore.dll); " +
	"install the Containers feature (Install-WindowsFeature -Name Containers, or " +
	"Enable-WindowsOptionalFeature -Online -FeatureName Containers) and restart"

// classOf is the errdefs class of an error with facts f, or nil. The order
// matters where hcsshim reports two facts at once: ERROR_NOT_FOUND is both
// not-exist and already-stopped, both NotFound here.
func classOf(f errFacts) error {
	switch {
	case f.AlreadyExists:
		return errdefs.ErrAlreadyExists
	case f.NotExist, f.AlreadyStopped:
		return errdefs.ErrNotFound
	case f.AlreadyClosed:
		return errdefs.ErrFailedPrecondition
	case f.Timeout:
		return context.DeadlineExceeded
	case f.NotSupported:
		return compute.ErrNotSupported
	case f.ImageMismatch, f.InvalidState:
		return errdefs.ErrFailedPrecondition
	case f.AccessDenied:
		return errdefs.ErrPermissionDenied
	case f.Unavailable, f.Pending, f.InvalidHandle, f.ServiceMissing:
		return errdefs.ErrUnavailable
	}
	return nil
}

// goneWhileQuerying is runhcs's reading of a failed statistics or process
// list query: a system that is stopping answers with invalid state, access
// denied or an invalid handle, and is as good as gone.
func goneWhileQuerying(f errFacts) bool {
	return f.NotExist || f.AlreadyStopped || f.InvalidState || f.AccessDenied || f.InvalidHandle
}

// invalid is an errdefs.ErrInvalidArgument error.
func invalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}

// notSupported is a compute.ErrNotSupported error.
func notSupported(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), compute.ErrNotSupported)
}
