//go:build windows

package main

import (
	"context"

	"golang.org/x/sys/windows/svc"
)

// serviceName is the name install.ps1 registers the snapshotter under.
const serviceName = "winproc-snapshotter"

// runAsService runs serve under the Windows service manager when it started
// this process: it reports the service running, and a Stop or Shutdown
// request ends serve's context. It reports false when the process is not a
// service (run from a console).
func runAsService(serve func(ctx context.Context) error) (bool, error) {
	isService, err := svc.IsWindowsService()
	if err != nil || !isService {
		return false, err
	}
	h := &handler{serve: serve}
	if err := svc.Run(serviceName, h); err != nil {
		return true, err
	}
	return true, h.err
}

type handler struct {
	serve func(ctx context.Context) error
	err   error
}

func (h *handler) Execute(_ []string, requests <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.serve(ctx) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case err := <-done:
			h.err = err
			if err != nil {
				// A service-specific exit code tells the service manager
				// it failed (it then applies the recovery actions).
				return true, 1
			}
			return false, 0
		case r := <-requests:
			switch r.Cmd {
			case svc.Interrogate:
				status <- r.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending}
				cancel()
			}
		}
	}
}
