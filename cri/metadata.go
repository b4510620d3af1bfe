package cri

import (
	"encoding/json"
	"fmt"

	"github.com/containerd/errdefs"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxMetadataExtension is the extension containerd's CRI puts on a
// pod's pause container record in podsandbox mode
// (internal/cri/labels.SandboxMetadataExtension): the sandbox's metadata,
// PodSandboxConfig included, as JSON.
const SandboxMetadataExtension = "io.cri-containerd.sandbox.metadata"

// FromSandboxMetadata reads the PodSandboxConfig out of the value of a
// pause container's SandboxMetadataExtension: containerd's versioned
// sandbox metadata (internal/cri/store/sandbox.Metadata, version "v1",
// written with encoding/json). With it, podsandbox mode validates a pod
// with FromConfig as shim mode does. An unknown version is
// errdefs.ErrNotImplemented.
func FromSandboxMetadata(value []byte) (*runtime.PodSandboxConfig, error) {
	var versioned struct {
		Version  string
		Metadata struct {
			Config *runtime.PodSandboxConfig
		}
	}
	if err := json.Unmarshal(value, &versioned); err != nil {
		return nil, invalid("the pause container's %s extension is not containerd's sandbox metadata: %v", SandboxMetadataExtension, err)
	}
	if versioned.Version != "v1" {
		return nil, fmt.Errorf("the pause container's %s extension has version %q; winproc reads containerd's version v1: %w", SandboxMetadataExtension, versioned.Version, errdefs.ErrNotImplemented)
	}
	if versioned.Metadata.Config == nil {
		return nil, invalid("the pause container's %s extension has no pod config", SandboxMetadataExtension)
	}
	return versioned.Metadata.Config, nil
}
