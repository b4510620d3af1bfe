// Command containerd-shim-winproc-v2 is winproc's containerd runtime v2 shim
// (runtime_type io.containerd.winproc.v2): one shim per pod, its containers
// compute systems behind package compute. Package manager answers
// containerd's start and delete; package plugin serves the task and sandbox
// APIs.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/manager"
	_ "github.com/winproc/winproc/shim/plugin"
)

func main() {
	m := manager.New(containerdnames.RuntimeType)
	// containerd before 2.3 starts shims by a protocol pkg/shim refuses.
	if handled, err := startLegacy(context.Background(), m); handled {
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s", m.Name(), err)
			os.Exit(1)
		}
		return
	}
	if err := holdThroughHostShutdown(); err != nil {
		// The shim still serves; it may end early at the host's shutdown.
		log.L.WithError(err).Warn("cannot hold on through the host's shutdown")
	}
	shim.RunShim(context.Background(), m, func(c *shim.Config) {
		// pkg/shim's reaper waits for any child and would take exit
		// statuses from the backends, which wait for their own processes
		// (the emulation also reaps the orphans it knows, precisely).
		c.NoReaper = true
	})
}
