package main

// Console control events (wincon.h), as Windows delivers them to the
// handlers of SetConsoleCtrlHandler. The values are Windows', written out
// so the decision builds and is tested off Windows too.
const (
	ctrlCEvent        = 0
	ctrlBreakEvent    = 1
	ctrlCloseEvent    = 2
	ctrlLogoffEvent   = 5
	ctrlShutdownEvent = 6
)

// holdsOn reports whether the shim keeps serving through the console
// control event ctrlType rather than ending.
//
// At a node's shutdown Windows sends CTRL_SHUTDOWN_EVENT to the console
// handlers of every process left in the services' session, the shims
// among them, while the kubelet's graceful node shutdown is still stopping
// the pods through containerd (HandlerRoutine, Microsoft docs). Go's
// runtime turns CTRL_CLOSE, CTRL_LOGOFF and CTRL_SHUTDOWN into SIGTERM,
// and containerd's pkg/shim ends the shim on SIGTERM (handleExitSignals):
// the shim would go before containerd stopped its tasks, leaving their
// compute systems to no shim. So the shim holds on through those three; it
// ends when containerd shuts it down, or when Windows ends the process
// after its shutdown timeout. CTRL_C and CTRL_BREAK, which only a person
// or a program aiming at the shim's process group sends, still end it.
func holdsOn(ctrlType uint32) bool {
	switch ctrlType {
	case ctrlCloseEvent, ctrlLogoffEvent, ctrlShutdownEvent:
		return true
	}
	return false
}

// eventName names a console control event in the shim's log.
func eventName(ctrlType uint32) string {
	switch ctrlType {
	case ctrlCEvent:
		return "CTRL_C_EVENT"
	case ctrlBreakEvent:
		return "CTRL_BREAK_EVENT"
	case ctrlCloseEvent:
		return "CTRL_CLOSE_EVENT"
	case ctrlLogoffEvent:
		return "CTRL_LOGOFF_EVENT"
	case ctrlShutdownEvent:
		return "CTRL_SHUTDOWN_EVENT"
	}
	return "console control event"
}
