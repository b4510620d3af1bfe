//go:build windows

package main

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

func TestConsoleEventValues(t *testing.T) {
	for _, tc := range []struct{ ours, windows uint32 }{
		{ctrlCEvent, windows.CTRL_C_EVENT},
		{ctrlBreakEvent, windows.CTRL_BREAK_EVENT},
		{ctrlCloseEvent, windows.CTRL_CLOSE_EVENT},
		{ctrlLogoffEvent, windows.CTRL_LOGOFF_EVENT},
		{ctrlShutdownEvent, windows.CTRL_SHUTDOWN_EVENT},
	} {
		if tc.ours != tc.windows {
			t.Errorf("%s is %d, Windows' %d", eventName(tc.ours), tc.ours, tc.windows)
		}
	}
}

// The handler, called as Windows calls a HandlerRoutine: it does not
// return for CTRL_CLOSE, CTRL_LOGOFF and CTRL_SHUTDOWN until released
// (so Windows does not end the process and the Go runtime's handler does
// not turn the event into SIGTERM for pkg/shim), and passes CTRL_C and
// CTRL_BREAK on at once.
func TestHostEventHandler(t *testing.T) {
	terms := make(chan os.Signal, 4)
	signal.Notify(terms, syscall.SIGTERM)
	t.Cleanup(func() { signal.Stop(terms) })
	for _, tc := range []struct {
		event uint32
		hold  bool
	}{
		{windows.CTRL_C_EVENT, false},
		{windows.CTRL_BREAK_EVENT, false},
		{windows.CTRL_CLOSE_EVENT, true},
		{windows.CTRL_LOGOFF_EVENT, true},
		{windows.CTRL_SHUTDOWN_EVENT, true},
	} {
		t.Run(eventName(tc.event), func(t *testing.T) {
			release := make(chan struct{})
			handler := hostEventHandler(release)
			returned := make(chan uintptr, 1)
			go func() {
				r, _, _ := syscall.SyscallN(handler, uintptr(tc.event))
				returned <- r
			}()
			if !tc.hold {
				select {
				case r := <-returned:
					if r != 0 {
						t.Errorf("the handler took the event (%d): the Go runtime's handler would not see it", r)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the handler holds on")
				}
				close(release)
				return
			}
			select {
			case r := <-returned:
				t.Fatalf("the handler returned %d at once: Windows would end the process", r)
			case <-time.After(300 * time.Millisecond):
			}
			close(release)
			select {
			case r := <-returned:
				if r != 1 {
					t.Errorf("the released handler returned %d, want 1 (handled)", r)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not return once released")
			}
			select {
			case s := <-terms:
				t.Errorf("%v reached the program", s)
			default:
			}
		})
	}
}

// Registered before the Go runtime's handler in the process's chain, the
// handler passes CTRL_C on: it still arrives as os.Interrupt, which
// pkg/shim ends the shim on. Wine delivers CTRL_C (GenerateConsoleCtrlEvent)
// but not CTRL_CLOSE, CTRL_LOGOFF or CTRL_SHUTDOWN; those are proven by
// calling the handler, above.
func TestHostEventHandlerInTheChain(t *testing.T) {
	release := make(chan struct{})
	handler := hostEventHandler(release)
	if err := addConsoleHandler(handler); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { procSetConsoleCtrlHandler.Call(handler, 0) })
	ints := make(chan os.Signal, 1)
	signal.Notify(ints, os.Interrupt)
	t.Cleanup(func() { signal.Stop(ints) })
	if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_C_EVENT, 0); err != nil {
		// go test's -exec gives the test no console: make one.
		kernel32 := windows.NewLazySystemDLL("kernel32.dll")
		kernel32.NewProc("FreeConsole").Call() // one that takes no events
		if r, _, aerr := kernel32.NewProc("AllocConsole").Call(); r == 0 {
			t.Skipf("no console to send CTRL_C to (%v), and none made: %v", err, aerr)
		}
		t.Cleanup(func() { kernel32.NewProc("FreeConsole").Call() })
		if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_C_EVENT, 0); err != nil {
			t.Skipf("no CTRL_C in a console of its own: %v", err)
		}
	}
	// Before the console goes: a handler that holds on would hold that.
	t.Cleanup(func() { close(release) })
	select {
	case <-ints:
	case <-time.After(10 * time.Second):
		t.Fatal("CTRL_C did not reach the program through the shim's handler")
	}
}

// CTRL_SHUTDOWN_EVENT as Windows delivers it: a new thread in the process
// runs kernelbase's CtrlRoutine with the event, which calls the process's
// handlers, last added first, then the default one (ExitProcess). Wine's
// CtrlRoutine does the same, though Wine never starts it for this event.
// With the shim's handler the thread holds on and the program sees no
// SIGTERM (pkg/shim would end the shim on one); once released, the chain
// stops at the shim's handler.
func TestShutdownEventInTheChain(t *testing.T) {
	kernelbase := windows.NewLazySystemDLL("kernelbase.dll")
	ctrlRoutine := kernelbase.NewProc("CtrlRoutine")
	if err := ctrlRoutine.Find(); err != nil {
		t.Fatalf("kernelbase.dll exports no CtrlRoutine: %v", err)
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	t.Cleanup(func() { signal.Stop(terms) })
	release := make(chan struct{})
	handler := hostEventHandler(release)
	if err := addConsoleHandler(handler); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { procSetConsoleCtrlHandler.Call(handler, 0) })
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})

	createThread := windows.NewLazySystemDLL("kernel32.dll").NewProc("CreateThread")
	h, _, err := createThread.Call(0, 0, ctrlRoutine.Addr(), windows.CTRL_SHUTDOWN_EVENT, 0, 0)
	if h == 0 {
		t.Fatalf("CreateThread(CtrlRoutine, CTRL_SHUTDOWN_EVENT): %v", err)
	}
	thread := windows.Handle(h)
	t.Cleanup(func() { windows.CloseHandle(thread) })

	select {
	case s := <-terms:
		t.Fatalf("CTRL_SHUTDOWN_EVENT reached the program as %v: pkg/shim ends the shim on it", s)
	case <-time.After(500 * time.Millisecond):
	}
	if ev, err := windows.WaitForSingleObject(thread, 0); ev != uint32(windows.WAIT_TIMEOUT) {
		t.Fatalf("the event's thread ended at once (%d, %v): Windows would go on to end the process", ev, err)
	}
	close(release)
	released = true
	if ev, err := windows.WaitForSingleObject(thread, 10000); ev != windows.WAIT_OBJECT_0 {
		t.Fatalf("the event's thread did not end once the handler was released: %d, %v", ev, err)
	}
	select {
	case s := <-terms:
		t.Errorf("%v reached the program after the shim's handler took the event", s)
	case <-time.After(200 * time.Millisecond):
	}
}
