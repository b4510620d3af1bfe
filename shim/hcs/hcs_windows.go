//go:build windows

package hcs

import (
	"errors"

	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/hcn"
	"github.com/Microsoft/hcsshim/osversion"
	"golang.org/x/sys/windows"
)

// This file is the backend's only contact with hcsshim: thin calls into its
// public root package, hcn and osversion, and field-by-field copies between
// hcsshim's schema-v1 types and the mirrors of config.go and stats.go.
// Every decision is made in the platform-neutral files.

// New returns the HCS backend.
func New(opts Options) (*Backend, error) {
	return newBackend(windowsAPI{}, opts), nil
}

type windowsAPI struct{}

var _ hcsAPI = windowsAPI{}

func (windowsAPI) createContainer(id string, c *containerConfig) (hcsContainer, error) {
	hc, err := hcsshim.CreateContainer(id, toHCSContainerConfig(c))
	if err != nil {
		return nil, err
	}
	return windowsContainer{hc}, nil
}

func (windowsAPI) openContainer(id string) (hcsContainer, error) {
	hc, err := hcsshim.OpenContainer(id)
	if err != nil {
		return nil, err
	}
	return windowsContainer{hc}, nil
}

func (windowsAPI) layerID(name string) (string, error) {
	g, err := hcsshim.NameToGuid(name)
	if err != nil {
		return "", err
	}
	return g.ToString(), nil
}

// The layer functions join DriverInfo.HomeDir and the id; an empty HomeDir
// and the layer's full path is the path itself (as hcsshim's wclayer tool
// calls them).
var layerDriver = hcsshim.DriverInfo{}

func (windowsAPI) activateLayer(path string) error {
	return hcsshim.ActivateLayer(layerDriver, path)
}

func (windowsAPI) prepareLayer(path string, parents []string) error {
	return hcsshim.PrepareLayer(layerDriver, path, parents)
}

func (windowsAPI) layerMountPath(path string) (string, error) {
	return hcsshim.GetLayerMountPath(layerDriver, path)
}

func (windowsAPI) unprepareLayer(path string) error {
	return hcsshim.UnprepareLayer(layerDriver, path)
}

func (windowsAPI) deactivateLayer(path string) error {
	return hcsshim.DeactivateLayer(layerDriver, path)
}

func (windowsAPI) namespaceEndpoints(namespace string) ([]string, error) {
	return hcn.GetNamespaceEndpointIds(namespace)
}

func (windowsAPI) hostBuild() uint16 {
	return osversion.Build()
}

func (windowsAPI) activeProcessors() uint32 {
	return windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS)
}

// facts asks hcsshim's predicates about the hcsshim error inside err, and
// reads its Windows error code.
func (windowsAPI) facts(err error) errFacts {
	if err == nil {
		return errFacts{}
	}
	// The predicates unwrap ContainerError and ProcessError themselves but
	// not HcsError (the layer functions' error), nor the backend's own
	// wrapping; give them the error inside.
	//
	// Close unregisters the notification callback before it marks the
	// handle closed, and the goroutine hcsshim keeps in Wait wakes up on
	// the closed channels: Wait after Close returns ErrHandleClose as often
	// as ErrAlreadyClosed. Both mean the handle was closed.
	inner := innerError(hcsshimError(err))
	f := errFacts{
		NotExist:       hcsshim.IsNotExist(inner) || hnsNotFound(err) || hcn.IsNotFoundError(err),
		AlreadyStopped: hcsshim.IsAlreadyStopped(inner),
		AlreadyClosed:  hcsshim.IsAlreadyClosed(inner) || errors.Is(inner, hcsshim.ErrHandleClose),
		Pending:        hcsshim.IsPending(inner),
		Timeout:        hcsshim.IsTimeout(inner),
		NotSupported:   hcsshim.IsNotSupported(inner),
		InvalidState:   hcsshim.IsOperationInvalidState(inner),
		AccessDenied:   hcsshim.IsAccessIsDenied(inner),
		Unavailable:    errors.Is(inner, hcsshim.ErrUnexpectedProcessAbort),
	}
	return f.or(errnoFacts(inner))
}

// hnsNotFound reports HNS's not-found errors anywhere in err (hcsshim's
// IsNotExist only recognises them unwrapped).
func hnsNotFound(err error) bool {
	var e hcsshim.EndpointNotFoundError
	var n hcsshim.NetworkNotFoundError
	return errors.As(err, &e) || errors.As(err, &n)
}

// hcsshimError finds hcsshim's error in err, which the backend may have
// wrapped.
func hcsshimError(err error) error {
	var ce *hcsshim.ContainerError
	if errors.As(err, &ce) {
		return ce
	}
	var pe *hcsshim.ProcessError
	if errors.As(err, &pe) {
		return pe
	}
	var he *hcsshim.HcsError
	if errors.As(err, &he) {
		return he
	}
	return err
}

// innerError is the error inside hcsshim's ContainerError, ProcessError and
// HcsError, which have no Unwrap method.
func innerError(err error) error {
	for {
		switch e := err.(type) {
		case *hcsshim.ContainerError:
			err = e.Err
		case *hcsshim.ProcessError:
			err = e.Err
		case *hcsshim.HcsError:
			err = e.Err
		default:
			return err
		}
	}
}

// windowsContainer is an hcsshim.Container with the backend's mirror types.
type windowsContainer struct {
	c hcsshim.Container
}

func (w windowsContainer) Start() error     { return w.c.Start() }
func (w windowsContainer) Shutdown() error  { return w.c.Shutdown() }
func (w windowsContainer) Terminate() error { return w.c.Terminate() }
func (w windowsContainer) Wait() error      { return w.c.Wait() }
func (w windowsContainer) Close() error     { return w.c.Close() }

func (w windowsContainer) Statistics() (statistics, error) {
	s, err := w.c.Statistics()
	if err != nil {
		return statistics{}, err
	}
	return statisticsFrom(s), nil
}

func (w windowsContainer) ProcessList() ([]processListItem, error) {
	list, err := w.c.ProcessList()
	if err != nil {
		return nil, err
	}
	return processListFrom(list), nil
}

func (w windowsContainer) CreateProcess(c *processConfig) (hcsProcess, error) {
	p, err := w.c.CreateProcess(toHCSProcessConfig(c))
	if err != nil {
		return nil, err
	}
	return p, nil
}

func toHCSContainerConfig(c *containerConfig) *hcsshim.ContainerConfig {
	h := &hcsshim.ContainerConfig{
		SystemType:                 c.SystemType,
		Name:                       c.Name,
		Owner:                      c.Owner,
		VolumePath:                 c.VolumePath,
		IgnoreFlushesDuringBoot:    c.IgnoreFlushesDuringBoot,
		LayerFolderPath:            c.LayerFolderPath,
		Credentials:                c.Credentials,
		ProcessorCount:             c.ProcessorCount,
		ProcessorWeight:            c.ProcessorWeight,
		ProcessorMaximum:           c.ProcessorMaximum,
		StorageIOPSMaximum:         c.StorageIOPSMaximum,
		StorageBandwidthMaximum:    c.StorageBandwidthMaximum,
		StorageSandboxSize:         c.StorageSandboxSize,
		MemoryMaximumInMB:          c.MemoryMaximumInMB,
		HostName:                   c.HostName,
		HvPartition:                c.HvPartition,
		NetworkSharedContainerName: c.NetworkSharedContainerName,
		EndpointList:               c.EndpointList,
		AllowUnqualifiedDNSQuery:   c.AllowUnqualifiedDNSQuery,
		DNSSearchList:              c.DNSSearchList,
	}
	for _, l := range c.Layers {
		h.Layers = append(h.Layers, hcsshim.Layer{ID: l.ID, Path: l.Path})
	}
	for _, d := range c.MappedDirectories {
		h.MappedDirectories = append(h.MappedDirectories, hcsshim.MappedDir{
			HostPath:          d.HostPath,
			ContainerPath:     d.ContainerPath,
			ReadOnly:          d.ReadOnly,
			BandwidthMaximum:  d.BandwidthMaximum,
			IOPSMaximum:       d.IOPSMaximum,
			CreateInUtilityVM: d.CreateInUtilityVM,
		})
	}
	for _, p := range c.MappedPipes {
		h.MappedPipes = append(h.MappedPipes, hcsshim.MappedPipe{HostPath: p.HostPath, ContainerPipeName: p.ContainerPipeName})
	}
	for _, d := range c.AssignedDevices {
		h.AssignedDevices = append(h.AssignedDevices, hcsshim.AssignedDevice{InterfaceClassGUID: d.InterfaceClassGUID})
	}
	return h
}

func toHCSProcessConfig(c *processConfig) *hcsshim.ProcessConfig {
	return &hcsshim.ProcessConfig{
		CommandLine:      c.CommandLine,
		User:             c.User,
		WorkingDirectory: c.WorkingDirectory,
		Environment:      c.Environment,
		EmulateConsole:   c.EmulateConsole,
		CreateStdInPipe:  c.CreateStdInPipe,
		CreateStdOutPipe: c.CreateStdOutPipe,
		CreateStdErrPipe: c.CreateStdErrPipe,
		ConsoleSize:      c.ConsoleSize,
	}
}

func statisticsFrom(s hcsshim.Statistics) statistics {
	return statistics{
		Timestamp:          s.Timestamp,
		ContainerStartTime: s.ContainerStartTime,
		Uptime100ns:        s.Uptime100ns,
		Memory: memoryStats{
			UsageCommitBytes:            s.Memory.UsageCommitBytes,
			UsageCommitPeakBytes:        s.Memory.UsageCommitPeakBytes,
			UsagePrivateWorkingSetBytes: s.Memory.UsagePrivateWorkingSetBytes,
		},
		Processor: processorStats{
			TotalRuntime100ns:  s.Processor.TotalRuntime100ns,
			RuntimeUser100ns:   s.Processor.RuntimeUser100ns,
			RuntimeKernel100ns: s.Processor.RuntimeKernel100ns,
		},
		Storage: storageStats{
			ReadCountNormalized:  s.Storage.ReadCountNormalized,
			ReadSizeBytes:        s.Storage.ReadSizeBytes,
			WriteCountNormalized: s.Storage.WriteCountNormalized,
			WriteSizeBytes:       s.Storage.WriteSizeBytes,
		},
	}
}

func processListFrom(list []hcsshim.ProcessListItem) []processListItem {
	out := make([]processListItem, 0, len(list))
	for _, p := range list {
		out = append(out, processListItem{
			CreateTimestamp:              p.CreateTimestamp,
			ImageName:                    p.ImageName,
			KernelTime100ns:              p.KernelTime100ns,
			MemoryCommitBytes:            p.MemoryCommitBytes,
			MemoryWorkingSetPrivateBytes: p.MemoryWorkingSetPrivateBytes,
			MemoryWorkingSetSharedBytes:  p.MemoryWorkingSetSharedBytes,
			ProcessId:                    p.ProcessId,
			UserTime100ns:                p.UserTime100ns,
		})
	}
	return out
}
