//go:build windows

package main

import (
	"fmt"

	"github.com/containerd/log"
	"golang.org/x/sys/windows"
)

var procSetConsoleCtrlHandler = windows.NewLazySystemDLL("kernel32.dll").NewProc("SetConsoleCtrlHandler")

// holdThroughHostShutdown registers hostEventHandler(nil): the shim holds
// on through CTRL_CLOSE, CTRL_LOGOFF and CTRL_SHUTDOWN until it exits.
func holdThroughHostShutdown() error {
	return addConsoleHandler(hostEventHandler(nil))
}

// addConsoleHandler adds handler to the process's console control
// handlers. Windows calls the last added first, so it runs before the Go
// runtime's own, which turns the events into signals.
func addConsoleHandler(handler uintptr) error {
	if r, _, err := procSetConsoleCtrlHandler.Call(handler, 1); r == 0 {
		return fmt.Errorf("SetConsoleCtrlHandler: %w", err)
	}
	return nil
}

// hostEventHandler is a HandlerRoutine. For the events holdsOn names it
// does not return until release is closed (never, for nil): returning
// would let Windows end the process, and passing the event on would have
// pkg/shim end it. While the handler waits the shim serves as before.
// Other events go on to the next handler, the Go runtime's.
func hostEventHandler(release <-chan struct{}) uintptr {
	return windows.NewCallback(func(ctrlType uint32) uintptr {
		if !holdsOn(ctrlType) {
			return 0
		}
		log.L.WithField("event", eventName(ctrlType)).Info("the host is closing the shim's console or shutting down: serving until containerd stops the tasks and shuts the shim down")
		<-release
		return 1
	})
}
