package specconv

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/Microsoft/hcsshim/pkg/annotations"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/shim/compute"
)

// runhcs reads these annotations for a process-isolated container
// (hcsshim v0.15.0: internal/hcsoci's ConvertCPULimits and the memory and
// storage limits of hcsdoc_wcow.go's createWindowsContainerDocument, with
// internal/oci's ParseAnnotations*; create.go's validateContainerConfig for
// gMSA; pkg/annotations' AnnotationExpansionMap for the unsafe-operations
// switch). winproc honours each one or refuses the container naming it; none
// is ignored.

// resourceAnnotations override a field of spec.windows.resources, as in
// runhcs: an annotation wins over the spec. Each sets its field to the
// annotation's value.
var resourceAnnotations = map[string]func(r *specs.WindowsResources, v uint64){
	annotations.ContainerProcessorCount: func(r *specs.WindowsResources, v uint64) {
		cpu(r).Count = &v
	},
	annotations.ContainerProcessorLimit: func(r *specs.WindowsResources, v uint64) {
		m := clampUint16(v)
		cpu(r).Maximum = &m
	},
	annotations.ContainerProcessorWeight: func(r *specs.WindowsResources, v uint64) {
		w := clampUint16(v)
		cpu(r).Shares = &w
	},
	annotations.ContainerMemorySizeInMB: func(r *specs.WindowsResources, v uint64) {
		b := v << 20
		if v > 1<<44 {
			b = ^uint64(0)
		}
		if r.Memory == nil {
			r.Memory = &specs.WindowsMemoryResources{}
		}
		r.Memory.Limit = &b
	},
	annotations.ContainerStorageQoSBandwidthMaximum: func(r *specs.WindowsResources, v uint64) {
		storage(r).Bps = &v
	},
	annotations.ContainerStorageQoSIopsMaximum: func(r *specs.WindowsResources, v uint64) {
		storage(r).Iops = &v
	},
}

// gmsaAnnotations, when true, forbid a gMSA credential spec. The
// unsafe-operations switch expands to the gMSA one among others, which are
// Hyper-V file-share settings or refuse HostProcess containers, which winproc
// refuses anyway.
var gmsaAnnotations = []string{annotations.WCOWDisableGMSA, annotations.DisableUnsafeOperations}

// dumpAnnotations set Windows Error Reporting's LocalDumps in the
// container (runhcs: createWindowsContainerDocument, parseDumpType and
// parseDumpCount). Type and count mean something only with the location.
var dumpAnnotations = []string{annotations.ContainerProcessDumpLocation, annotations.WCOWProcessDumpType, annotations.WCOWProcessDumpCount}

// refusedAnnotations are runhcs's process-isolation annotations winproc
// does not honour, with why.
var refusedAnnotations = map[string]string{
	annotations.DeviceExtensions: "device extensions are read from host files named in the annotation into the container document, which winproc does not do",
	// hcsshim internal/annotations WCOWRegistryAnnotationTest.
	"io.microsoft.container.wcow.test-registry-annotation": "it sets arbitrary registry values in the container, for hcsshim's own tests",
}

// processDumpsFrom reads the process dump annotations: no location is no
// dumps; the type is "mini" or "full" (default full), the count a positive
// number (default 10), as runhcs.
func processDumpsFrom(a map[string]string) (*compute.ProcessDumps, error) {
	folder, ok := a[annotations.ContainerProcessDumpLocation]
	if !ok || folder == "" {
		for _, k := range dumpAnnotations[1:] {
			if v, ok := a[k]; ok {
				return nil, invalid("annotation %s=%q without %s: set the dump folder in the container, or remove it", k, v, annotations.ContainerProcessDumpLocation)
			}
		}
		return nil, nil
	}
	d := &compute.ProcessDumps{Folder: folder, Type: compute.DumpFull, Count: 10}
	switch v := a[annotations.WCOWProcessDumpType]; v {
	case "", "full":
	case "mini":
		d.Type = compute.DumpMini
	default:
		return nil, invalid("annotation %s=%q: the dump type is mini or full", annotations.WCOWProcessDumpType, v)
	}
	if v, ok := a[annotations.WCOWProcessDumpCount]; ok && v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return nil, invalid("annotation %s=%q: the dump count is a whole number from 1 to %d", annotations.WCOWProcessDumpCount, v, math.MaxInt32)
		}
		d.Count = int32(n)
	}
	return d, nil
}

// HonouredAnnotations lists the annotations winproc acts on, sorted:
// containerdnames.Annotations, which containerd's config forwards, must be
// this list.
func HonouredAnnotations() []string {
	keys := append(append([]string{annotations.HostProcessInheritUser}, gmsaAnnotations...), dumpAnnotations...)
	for k := range resourceAnnotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// applyAnnotations returns the spec's resources with the resource
// annotations applied, and whether gMSA is disabled; it refuses an
// annotation it cannot honour or parse.
func applyAnnotations(a map[string]string, r *specs.WindowsResources) (_ *specs.WindowsResources, gmsaDisabled bool, err error) {
	for _, k := range slices.Sorted(maps.Keys(refusedAnnotations)) {
		if v, ok := a[k]; ok {
			return nil, false, invalid("annotation %s=%q: %s; winproc does not support it yet, so remove it or run the pod with runhcs", k, v, refusedAnnotations[k])
		}
	}
	for _, k := range gmsaAnnotations {
		v, ok := a[k]
		if !ok {
			continue
		}
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, false, invalid("annotation %s=%q is not true or false", k, v)
		}
		gmsaDisabled = gmsaDisabled || on
	}
	var out *specs.WindowsResources
	for _, k := range slices.Sorted(maps.Keys(resourceAnnotations)) {
		v, ok := a[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, false, invalid("annotation %s=%q is not a whole number", k, v)
		}
		if out == nil {
			out = copyResources(r)
		}
		resourceAnnotations[k](out, n)
	}
	if out == nil {
		return r, gmsaDisabled, nil
	}
	return out, gmsaDisabled, nil
}

// copyResources copies r deeply enough for the annotations to set fields.
func copyResources(r *specs.WindowsResources) *specs.WindowsResources {
	out := &specs.WindowsResources{}
	if r == nil {
		return out
	}
	*out = *r
	if r.CPU != nil {
		c := *r.CPU
		out.CPU = &c
	}
	if r.Memory != nil {
		m := *r.Memory
		out.Memory = &m
	}
	if r.Storage != nil {
		s := *r.Storage
		out.Storage = &s
	}
	return out
}

func cpu(r *specs.WindowsResources) *specs.WindowsCPUResources {
	if r.CPU == nil {
		r.CPU = &specs.WindowsCPUResources{}
	}
	return r.CPU
}

func storage(r *specs.WindowsResources) *specs.WindowsStorageResources {
	if r.Storage == nil {
		r.Storage = &specs.WindowsStorageResources{}
	}
	return r.Storage
}

// clampUint16 keeps an out-of-range value out of range, for the range
// check that follows to report it.
func clampUint16(v uint64) uint16 {
	if v > 0xffff {
		return 0xffff
	}
	return uint16(v)
}
