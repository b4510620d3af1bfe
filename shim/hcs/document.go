package hcs

import (
	"math"
	"strconv"
	"strings"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// mountedStorage is a container's file system once the layer functions
// have mounted it: what the document's Storage names.
type mountedStorage struct {
	// layers are the image layers, nearest parent first, with their ids
	// (hcsshim.NameToGuid of each directory's name).
	layers []schema2.Layer
	// volume is the scratch's volume, GetLayerMountPath's \\?\Volume{GUID}\.
	volume string
}

// The registry values every container gets, and those of process dumps.
const (
	controlKey     = `ControlSet001\Control`
	localDumpsKey  = `Microsoft\Windows\Windows Error Reporting\LocalDumps`
	containerIDVar = "{container_id}"
)

// containerDocument is the schema-v2 document that creates the
// process-isolated container id from s, as runhcs builds it (hcsshim
// v0.15.0 internal/hcsoci/hcsdoc_wcow.go createWindowsContainerDocument,
// and create.go CreateContainer for the ComputeSystem around it). s's
// mapped directories' host paths are already resolved (resolvePath). ccg is
// the Container Credential Guard instance made for s.CredentialSpec, nil
// without one. The differences from runhcs's document are listed in
// MAPPING.md and pinned by the differential test (document_oracle_test.go).
func containerDocument(id string, s *compute.Settings, st mountedStorage, ccg *schema2.ContainerCredentialGuardState) (*schema2.ComputeSystem, error) {
	if err := checkDocumentSettings(s, st, ccg); err != nil {
		return nil, err
	}
	r := s.Resources
	c := &schema2.Container{
		Storage: &schema2.Storage{
			Layers: append([]schema2.Layer(nil), st.layers...),
			Path:   withTrailingBackslash(st.volume),
		},
		// runhcs always sends the processor section, empty without limits.
		Processor: &schema2.Processor{
			Count:   int32(r.CPUCount),
			Maximum: int32(r.CPUMaximum),
			Weight:  int32(r.CPUWeight),
		},
		ContainerCredentialGuard: ccg,
		RegistryChanges:          &schema2.RegistryChanges{AddValues: registryValues(id, s.ProcessDumps)},
	}
	if s.HostName != "" {
		c.GuestOs = &schema2.GuestOs{HostName: s.HostName}
	}
	if mb := r.MemoryLimitMB(); mb > 0 {
		c.Memory = &schema2.Memory{SizeInMB: mb}
	}
	if r.StorageIOPSMaximum > 0 || r.StorageBandwidthMaximum > 0 {
		c.Storage.QoS = &schema2.StorageQoS{
			IopsMaximum:      int32(r.StorageIOPSMaximum),
			BandwidthMaximum: int32(r.StorageBandwidthMaximum),
		}
	}
	for _, d := range s.MappedDirectories {
		c.MappedDirectories = append(c.MappedDirectories, schema2.MappedDirectory{HostPath: d.HostPath, ContainerPath: d.ContainerPath, ReadOnly: d.ReadOnly})
	}
	for _, p := range s.MappedPipes {
		c.MappedPipes = append(c.MappedPipes, schema2.MappedPipe{ContainerPipeName: p.ContainerPipeName, HostPath: p.HostPath})
	}
	if n := s.Network; n.Namespace != "" || n.SharedContainerName != "" || len(n.DNSSearchList) > 0 || n.AllowUnqualifiedDNSQuery {
		// Every container of a pod joins the pod's namespace; schema v2
		// needs no sharing of the sandbox container's stack.
		c.Networking = &schema2.Networking{
			AllowUnqualifiedDnsQuery:   n.AllowUnqualifiedDNSQuery,
			DnsSearchList:              strings.Join(n.DNSSearchList, ","),
			NetworkSharedContainerName: n.SharedContainerName,
			Namespace:                  n.Namespace,
		}
	}
	for _, d := range s.AssignedDevices {
		switch d.Kind {
		case compute.DeviceClass:
			c.AssignedDevices = append(c.AssignedDevices, schema2.Device{InterfaceClassGuid: d.ID})
		case compute.DeviceLocationPath:
			c.AssignedDevices = append(c.AssignedDevices, schema2.Device{Type: schema2.DeviceInstance, LocationPath: d.ID})
		}
	}
	return &schema2.ComputeSystem{
		Owner:         Owner,
		SchemaVersion: &schema2.V21,
		// The container goes with the shim's last handle, as runhcs's: a
		// shim that dies leaves no silo running unowned.
		ShouldTerminateOnLastHandleClosed: true,
		Container:                         c,
	}, nil
}

// checkDocumentSettings refuses what the schema-v2 document cannot carry.
func checkDocumentSettings(s *compute.Settings, st mountedStorage, ccg *schema2.ContainerCredentialGuardState) error {
	if s == nil {
		return invalid("the compute system settings are missing")
	}
	if len(st.layers) == 0 || st.volume == "" {
		return invalid("the container's storage is not mounted: it needs its image layers and the scratch volume")
	}
	r := s.Resources
	if r.StorageIOPSMaximum > math.MaxInt32 || r.StorageBandwidthMaximum > math.MaxInt32 {
		return invalid("storage limits of %d IOPS and %d bytes a second: HCS takes at most %d of each (spec.windows.resources.storage iops and bps, or the io.microsoft.container.storage.qos annotations); lower them", r.StorageIOPSMaximum, r.StorageBandwidthMaximum, math.MaxInt32)
	}
	if len(s.Network.Endpoints) > 0 {
		return notSupported("spec.windows.network.endpointList (%s): HCS schema v2 connects a container through its HNS namespace; put the endpoints in a namespace and set spec.windows.network.networkNamespace", strings.Join(s.Network.Endpoints, ", "))
	}
	if (s.CredentialSpec != "") != (ccg != nil) {
		return invalid("a gMSA credential spec needs its Container Credential Guard instance, and only it")
	}
	if d := s.ProcessDumps; d != nil && (d.Folder == "" || d.Count <= 0 || d.Type != compute.DumpMini && d.Type != compute.DumpFull) {
		return invalid("process dumps need a folder, a positive count and a mini or full type, not %+v", *d)
	}
	return nil
}

// registryValues are the registry values set in the container:
// WaitToKillServiceTimeout, so that a servercore image's service control
// manager waits out the shutdown grace period instead of its own 5 s
// before killing services (runhcs's fix for its bug 36689012, with its
// value), and Windows Error Reporting's LocalDumps when dumps are asked
// for.
func registryValues(id string, d *compute.ProcessDumps) []schema2.RegistryValue {
	values := []schema2.RegistryValue{{
		Key:         &schema2.RegistryKey{Hive: schema2.HiveSystem, Name: controlKey},
		Name:        "WaitToKillServiceTimeout",
		Type:        schema2.TypeString,
		StringValue: strconv.Itoa(math.MaxInt32),
	}}
	if d == nil {
		return values
	}
	key := &schema2.RegistryKey{Hive: schema2.HiveSoftware, Name: localDumpsKey}
	return append(values,
		schema2.RegistryValue{Key: key, Name: "DumpFolder", Type: schema2.TypeString, StringValue: dumpFolder(id, d.Folder)},
		schema2.RegistryValue{Key: key, Name: "DumpType", Type: schema2.TypeDWord, DWordValue: int32(d.Type)},
		schema2.RegistryValue{Key: key, Name: "DumpCount", Type: schema2.TypeDWord, DWordValue: d.Count},
	)
}

// dumpFolder replaces a trailing {container_id}, in either case, by the
// container's id: one folder per container when a share from the host is
// mounted there.
func dumpFolder(id, folder string) string {
	for _, v := range []string{containerIDVar, strings.ToUpper(containerIDVar)} {
		if base, ok := strings.CutSuffix(folder, v); ok {
			return base + id
		}
	}
	return folder
}

func withTrailingBackslash(p string) string {
	if strings.HasSuffix(p, `\`) {
		return p
	}
	return p + `\`
}
