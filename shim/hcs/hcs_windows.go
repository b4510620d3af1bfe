//go:build windows

package hcs

import (
	"errors"

	"github.com/Microsoft/go-winio/pkg/fs"
	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/osversion"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/shim/scratch"
)

// This file gives the backend its Windows: compute systems through
// computeCore over the computecore.dll binding, and thin calls into
// hcsshim's public layer functions, go-winio and osversion. Every decision
// is made in the platform-neutral files.

// New returns the HCS backend.
func New(opts Options) (*Backend, error) {
	return newBackend(windowsAPI{computeCore: &computeCore{api: newComputecoreBinding(computecoreDLL())}}, opts), nil
}

type windowsAPI struct {
	*computeCore
	scratch.Host
}

var _ hcsAPI = windowsAPI{}

func (windowsAPI) layerID(name string) (string, error) {
	g, err := hcsshim.NameToGuid(name)
	if err != nil {
		return "", err
	}
	return g.ToString(), nil
}

func (windowsAPI) resolvePath(path string) (string, error) {
	return fs.ResolvePath(path)
}

func (windowsAPI) hostBuild() uint16 {
	return osversion.Build()
}

func (windowsAPI) activeProcessors() uint32 {
	return windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS)
}

// facts reads computeCore's errors and HCS's HRESULTs, and the layer
// functions' hcsshim errors, whose Windows error is inside HcsError.
func (windowsAPI) facts(err error) errFacts {
	if err == nil {
		return errFacts{}
	}
	var he *hcsshim.HcsError
	if errors.As(err, &he) {
		return coreFacts(he.Err).or(coreFacts(err))
	}
	return coreFacts(err)
}
