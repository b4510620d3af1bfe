package hcs

import (
	"math"
	"strings"

	"github.com/Microsoft/hcsshim/osversion"

	"github.com/winproc/winproc/shim/compute"
)

// Owner is the HCS owner of every system the backend creates: the
// management stack HCS records for it (docker uses "docker", runhcs the
// shim's binary name).
const Owner = "winproc"

// The types below are hcsshim's schema-v1 documents (hcsshim.ContainerConfig,
// hcsshim.ProcessConfig and their parts), which are aliases of an internal
// package that compiles on Windows only. They carry the fields winproc sets,
// with schema1's JSON names and omitempty rules, so that their JSON is the
// document HCS receives and tests on Linux can check it. hcs_windows.go
// copies them field by field into the hcsshim types; a Windows test checks
// that both marshal to the same JSON.

// containerConfig is hcsshim.ContainerConfig.
type containerConfig struct {
	SystemType                 string
	Name                       string
	Owner                      string           `json:",omitempty"`
	VolumePath                 string           `json:",omitempty"`
	IgnoreFlushesDuringBoot    bool             `json:",omitempty"`
	LayerFolderPath            string           `json:",omitempty"`
	Layers                     []layerRef       // no omitempty in schema1
	Credentials                string           `json:",omitempty"`
	ProcessorCount             uint32           `json:",omitempty"`
	ProcessorWeight            uint64           `json:",omitempty"`
	ProcessorMaximum           int64            `json:",omitempty"`
	StorageIOPSMaximum         uint64           `json:",omitempty"`
	StorageBandwidthMaximum    uint64           `json:",omitempty"`
	StorageSandboxSize         uint64           `json:",omitempty"`
	MemoryMaximumInMB          int64            `json:",omitempty"`
	HostName                   string           `json:",omitempty"`
	MappedDirectories          []mappedDir      `json:",omitempty"`
	MappedPipes                []mappedPipe     `json:",omitempty"`
	HvPartition                bool             // no omitempty in schema1
	NetworkSharedContainerName string           `json:",omitempty"`
	EndpointList               []string         `json:",omitempty"`
	AllowUnqualifiedDNSQuery   bool             `json:",omitempty"`
	DNSSearchList              string           `json:",omitempty"`
	AssignedDevices            []assignedDevice `json:",omitempty"`
}

// layerRef is hcsshim.Layer: a read-only image layer.
type layerRef struct {
	ID   string
	Path string
}

// mappedDir is hcsshim.MappedDir. The per-mount QoS and utility-VM fields
// are always zero for a process-isolated container, but schema1 sends them.
type mappedDir struct {
	HostPath          string
	ContainerPath     string
	ReadOnly          bool
	BandwidthMaximum  uint64
	IOPSMaximum       uint64
	CreateInUtilityVM bool
}

// mappedPipe is hcsshim.MappedPipe.
type mappedPipe struct {
	HostPath          string
	ContainerPipeName string
}

// assignedDevice is hcsshim.AssignedDevice.
type assignedDevice struct {
	InterfaceClassGUID string `json:"InterfaceClassGuid,omitempty"`
}

// processConfig is hcsshim.ProcessConfig.
type processConfig struct {
	CommandLine      string            `json:",omitempty"`
	User             string            `json:",omitempty"`
	WorkingDirectory string            `json:",omitempty"`
	Environment      map[string]string `json:",omitempty"`
	EmulateConsole   bool              `json:",omitempty"`
	CreateStdInPipe  bool              `json:",omitempty"`
	CreateStdOutPipe bool              `json:",omitempty"`
	CreateStdErrPipe bool              `json:",omitempty"`
	// ConsoleSize is {height, width}.
	ConsoleSize [2]uint `json:",omitempty"`
}

// checkSettings refuses what the public schema-v1 API cannot do, and what
// this host's Windows build cannot, before anything is touched. hostBuild
// is osversion.Build().
func checkSettings(s *compute.Settings, hostBuild uint16) error {
	if s == nil {
		return invalid("the compute system settings are missing")
	}
	if s.Layers.Scratch == "" {
		return invalid("the container has no scratch layer")
	}
	if len(s.Layers.Parents) == 0 {
		return invalid("the container has no image layers: a process-isolated container needs at least its base layer")
	}
	for i, p := range s.Layers.Parents {
		if p == "" {
			return invalid("image layer %d has an empty path", i)
		}
	}
	if len(s.Resources.CPUAffinity) > 0 {
		return notSupported("processor affinity (spec.windows.resources.cpu.affinity) cannot be set through HCS schema v1, which the HCS backend uses; remove it or use runhcs")
	}
	for _, d := range s.AssignedDevices {
		if d.Kind != compute.DeviceClass {
			return notSupported("device %s is named by location path, which HCS schema v1 cannot assign (an interface class GUID only); assign its interface class or use runhcs", d.ID)
		}
	}
	if s.ProcessDumps != nil {
		return notSupported("process dumps (annotation io.microsoft.container.processdumplocation) are Windows Error Reporting registry values in the container, which HCS schema v1 cannot set; remove the annotation or use runhcs")
	}
	if len(s.MappedPipes) > 0 && hostBuild < osversion.RS3 {
		return notSupported("named pipe mounts need Windows build %d (1709) or later; this host is build %d", osversion.RS3, hostBuild)
	}
	if len(s.AssignedDevices) > 0 && hostBuild < osversion.RS5 {
		return notSupported("device assignment needs Windows build %d (1809, Windows Server 2019) or later; this host is build %d", osversion.RS5, hostBuild)
	}
	return nil
}

// buildContainerConfig maps s onto the schema-v1 container document of
// system id. layers are the image layers with their ids (layerIDs),
// endpoints the HNS endpoints to attach (explicit ones and the namespace's,
// mergeEndpoints). VolumePath is left for the caller to set once the scratch
// is mounted: building the document first catches every mistake before a
// layer is touched.
func buildContainerConfig(id string, s *compute.Settings, layers []layerRef, endpoints []string) *containerConfig {
	c := &containerConfig{
		SystemType:                 "Container",
		Name:                       id,
		Owner:                      Owner,
		IgnoreFlushesDuringBoot:    s.IgnoreFlushesDuringBoot,
		LayerFolderPath:            s.Layers.Scratch,
		Layers:                     append([]layerRef(nil), layers...),
		Credentials:                s.CredentialSpec,
		ProcessorCount:             s.Resources.CPUCount,
		ProcessorWeight:            uint64(s.Resources.CPUWeight),
		ProcessorMaximum:           int64(s.Resources.CPUMaximum),
		StorageIOPSMaximum:         s.Resources.StorageIOPSMaximum,
		StorageBandwidthMaximum:    s.Resources.StorageBandwidthMaximum,
		StorageSandboxSize:         s.SandboxSizeBytes,
		MemoryMaximumInMB:          memoryMB(s.Resources),
		HostName:                   s.HostName,
		HvPartition:                false,
		NetworkSharedContainerName: s.Network.SharedContainerName,
		EndpointList:               endpoints,
		AllowUnqualifiedDNSQuery:   s.Network.AllowUnqualifiedDNSQuery,
		DNSSearchList:              strings.Join(s.Network.DNSSearchList, ","),
	}
	for _, d := range s.MappedDirectories {
		c.MappedDirectories = append(c.MappedDirectories, mappedDir{HostPath: d.HostPath, ContainerPath: d.ContainerPath, ReadOnly: d.ReadOnly})
	}
	for _, p := range s.MappedPipes {
		c.MappedPipes = append(c.MappedPipes, mappedPipe{HostPath: p.HostPath, ContainerPipeName: p.ContainerPipeName})
	}
	for _, d := range s.AssignedDevices {
		c.AssignedDevices = append(c.AssignedDevices, assignedDevice{InterfaceClassGUID: d.ID})
	}
	return c
}

// memoryMB is the memory limit in MiB, rounded up, and capped at what the
// schema's int64 holds (as hcsshim does).
func memoryMB(r compute.Resources) int64 {
	mb := r.MemoryLimitMB()
	if mb > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(mb)
}

// volumePath is the scratch volume as schema v1 takes it: GetLayerMountPath
// answers \\?\Volume{GUID}\ and v1 wants no trailing backslash (hcsshim
// strips it the same way).
func volumePath(mountPath string) string {
	return strings.TrimRight(mountPath, `\`)
}

// layerName is the directory name of a layer path, the name its layer id
// is derived from (hcsshim.NameToGuid of the base name, as hcsshim's
// wclayer.LayerID). The path is a Windows path whatever the platform:
// both separators count, trailing ones are ignored.
func layerName(path string) string {
	path = strings.TrimRight(path, `\/`)
	if i := strings.LastIndexAny(path, `\/`); i >= 0 {
		path = path[i+1:]
	}
	return path
}

// withPodNetwork is s with the network a pod's container gets under schema
// v1: an HNS endpoint attaches to one network compartment, so only the
// pod's sandbox (pause) container joins the namespace (its endpoints in
// EndpointList); every other container of the pod shares the sandbox
// container's network stack by naming it in NetworkSharedContainerName,
// as schema-v1 runtimes did (docker's container:<infra> network mode;
// hcsshim v0.15.0 internal/hcsoci/hcsdoc_wcow.go
// createWindowsContainerDocument passes the field through, and the RS4
// path of cmd/runhcs/container.go createContainer follows it to the
// sandbox's namespace). The sandbox container's id is the pod's id in
// both of containerd's sandbox modes. A spec that names its own shared
// container, or has no namespace, is left as it is.
func withPodNetwork(s *compute.Settings) *compute.Settings {
	n := s.Network
	if n.IsPodSandbox || n.PodSandbox == "" || n.Namespace == "" || n.SharedContainerName != "" {
		return s
	}
	c := *s
	c.Network.SharedContainerName = n.PodSandbox
	c.Network.Namespace = ""
	return &c
}

// mergeEndpoints is the EndpointList: the explicit endpoints in order, then
// the namespace's that are not already listed. HNS ids are GUIDs, compared
// ignoring case and braces.
func mergeEndpoints(explicit, fromNamespace []string) []string {
	var out []string
	seen := make(map[string]bool)
	for _, list := range [][]string{explicit, fromNamespace} {
		for _, e := range list {
			key := strings.ToLower(strings.Trim(e, "{}"))
			if e == "" || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, e)
		}
	}
	return out
}

// buildProcessConfig maps a process onto the schema-v1 process document.
// Pipes are created for the streams the caller connected; a Terminal
// process has no stderr pipe (its console merges the output into stdout).
func buildProcessConfig(p *compute.ProcessSettings) (*processConfig, error) {
	if p == nil {
		return nil, invalid("the process settings are missing")
	}
	if p.CommandLine == "" {
		return nil, invalid("the process has an empty command line")
	}
	c := &processConfig{
		CommandLine:      p.CommandLine,
		User:             p.User,
		WorkingDirectory: p.WorkingDirectory,
		Environment:      environment(p.Env),
		EmulateConsole:   p.Terminal,
		CreateStdInPipe:  p.Stdin != nil,
		CreateStdOutPipe: p.Stdout != nil,
		CreateStdErrPipe: p.Stderr != nil && !p.Terminal,
	}
	if p.Terminal {
		c.ConsoleSize = [2]uint{uint(p.ConsoleHeight), uint(p.ConsoleWidth)}
	}
	return c, nil
}

// environment turns the NAME=VALUE list into schema v1's map. Windows names
// are case-insensitive, so a later entry replaces an earlier one whatever
// its case, and the map keeps the later spelling. An empty value unsets the
// name: Windows has no empty variables, and runhcs drops them too. What the
// map loses is the order of the list and the duplicates, which do not
// matter once the later entry has won. Entries without '=' are skipped
// (specconv.FromSpec refuses them).
func environment(env []string) map[string]string {
	m := make(map[string]string)
	key := make(map[string]string) // upper-case name -> spelling in m
	for _, e := range env {
		name, value, ok := strings.Cut(e, "=")
		if !ok || name == "" {
			continue
		}
		upper := strings.ToUpper(name)
		if old, ok := key[upper]; ok {
			delete(m, old)
			delete(key, upper)
		}
		if value == "" {
			continue
		}
		m[name] = value
		key[upper] = name
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
