package hcs

import (
	"io"
	"sync"
)

// hcsHandle is an HCS handle: HCS_SYSTEM, HCS_PROCESS or HCS_OPERATION.
type hcsHandle uintptr

// eventType is HCS_EVENT_TYPE, the kind of a notification.
type eventType uint32

const (
	eventSystemExited      eventType = 0x00000001
	eventProcessExited     eventType = 0x00010000
	eventServiceDisconnect eventType = 0x02000000
)

// infiniteTimeout is INFINITE, for HcsWaitForOperationResult.
const infiniteTimeout = ^uint32(0)

// processPipes are what HcsGetOperationResultAndProcessInfo hands over for
// a created process: its id and the host ends of the pipes asked for (nil
// when not asked for). The caller closes them.
type processPipes struct {
	pid    uint32
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr io.ReadCloser
}

// stdioError is a pipe HCS handed over that could not be used: the
// process exists, so it is no failure of HCS's wait, and asking HCS again
// would not help.
type stdioError struct{ err error }

func (e *stdioError) Error() string { return "the process's pipes: " + e.err.Error() }
func (e *stdioError) Unwrap() error { return e.err }

// binding is HCS's documented compute API (computecore.dll, Windows build
// 17763 and later), one method per function the backend calls, with
// documents as JSON text and failures as the HRESULT (a syscall.Errno). On
// Windows, binding_windows.go implements it with system calls and nothing
// else; tests use a fake. Everything about calling it (operations, waits,
// cancellation, notifications, errors) is core.go's.
//
// The asynchronous functions take an operation made by createOperation:
// they return once HCS has accepted the request, and waitOperation returns
// the result when HCS has carried it out.
type binding interface {
	createOperation() (hcsHandle, error)
	closeOperation(op hcsHandle)
	// waitOperation is HcsWaitForOperationResult: the result document, and
	// the operation's failure.
	waitOperation(op hcsHandle, timeoutMs uint32) (string, error)
	// waitOperationProcess is HcsWaitForOperationResultAndProcessInfo.
	waitOperationProcess(op hcsHandle, timeoutMs uint32) (processPipes, string, error)
	// operationResult is HcsGetOperationResult: the result so far, for
	// the detail of a call that failed before it started.
	operationResult(op hcsHandle) (string, error)
	cancelOperation(op hcsHandle) error

	createComputeSystem(id, doc string, op hcsHandle) (hcsHandle, error)
	// openComputeSystem is HcsOpenComputeSystem with GENERIC_ALL.
	openComputeSystem(id string) (hcsHandle, error)
	closeComputeSystem(sys hcsHandle)
	startComputeSystem(sys, op hcsHandle) error
	shutDownComputeSystem(sys, op hcsHandle) error
	terminateComputeSystem(sys, op hcsHandle) error
	modifyComputeSystem(sys, op hcsHandle, doc string) error
	getComputeSystemProperties(sys, op hcsHandle, query string) error
	// enumerateComputeSystems is HcsEnumerateComputeSystems: the systems
	// query selects (a JSON document, here by owner), listed as a JSON
	// array in the operation's result.
	enumerateComputeSystems(query string, op hcsHandle) error
	// setComputeSystemCallback registers the notifications of sys for the
	// listener key of hcsEvents.
	setComputeSystemCallback(sys hcsHandle, key uintptr) error

	createProcess(sys hcsHandle, params string, op hcsHandle) (hcsHandle, error)
	// openProcess is HcsOpenProcess with GENERIC_ALL: a second handle to
	// process pid of sys.
	openProcess(sys hcsHandle, pid uint32) (hcsHandle, error)
	// getProcessInfo is HcsGetProcessInfo: the process's id and pipes, for
	// waitOperationProcess to hand over.
	getProcessInfo(p, op hcsHandle) error
	closeProcess(p hcsHandle)
	signalProcess(p, op hcsHandle, options string) error
	terminateProcess(p, op hcsHandle) error
	modifyProcess(p, op hcsHandle, doc string) error
	getProcessProperties(p, op hcsHandle) error
	setProcessCallback(p hcsHandle, key uintptr) error

	// modifyServiceSettings is HcsModifyServiceSettings; getServiceProperties
	// is HcsGetServiceProperties.
	modifyServiceSettings(doc string) error
	getServiceProperties(query string) (string, error)

	// setSiloAffinity pins the job object of container id's server silo
	// (\Container_<id>) to the processors of each group: what runhcs does
	// for spec.windows.resources.cpu.affinity, which HCS's document has no
	// field for.
	setSiloAffinity(id string, affinity []groupAffinity) error
}

// groupAffinity is GROUP_AFFINITY: processors of one processor group.
type groupAffinity struct {
	Mask  uint64
	Group uint16
}

// hcsEvents routes HCS's notifications to their listeners. HCS calls back
// with the context value given when the callback was set; that value is a
// key of this table, never a pointer, so a notification that arrives after
// its listener was removed (HCS may deliver one while a handle closes)
// finds nothing and is dropped.
var hcsEvents = &eventTable{listeners: make(map[uintptr]func(eventType, string))}

type eventTable struct {
	mu        sync.Mutex
	next      uintptr
	listeners map[uintptr]func(eventType, string)
}

// add registers f and returns its key. f is called on HCS's thread and
// must not block.
func (e *eventTable) add(f func(eventType, string)) uintptr {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	e.listeners[e.next] = f
	return e.next
}

func (e *eventTable) remove(key uintptr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.listeners, key)
}

// deliver passes a notification to the listener of key, if there still is
// one.
func (e *eventTable) deliver(key uintptr, t eventType, data string) {
	e.mu.Lock()
	f := e.listeners[key]
	e.mu.Unlock()
	if f != nil {
		f(t, data)
	}
}

func (e *eventTable) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.listeners)
}
