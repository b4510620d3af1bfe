package cri

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ConfigTypeURL is the type URL of the CreateSandboxRequest options
// containerd's CRI sends: typeurl.MarshalAny of a *runtime.PodSandboxConfig,
// which is the message's full protobuf name.
var ConfigTypeURL = string((&runtime.PodSandboxConfig{}).ProtoReflect().Descriptor().FullName())

// Decode reads the PodSandboxConfig from a CreateSandboxRequest's options
// (a *anypb.Any satisfies typeurl.Any). The type URL must be
// "runtime.v1.PodSandboxConfig", bare as containerd sends it or with a
// "type.googleapis.com/"-style prefix. Missing, empty, mistyped or
// undecodable options are errdefs.ErrInvalidArgument.
func Decode(options typeurl.Any) (*runtime.PodSandboxConfig, error) {
	if options == nil || (options.GetTypeUrl() == "" && len(options.GetValue()) == 0) {
		return nil, invalid("the sandbox has no options: winproc needs the CRI PodSandboxConfig (%s) as CreateSandboxRequest.options; create pods through containerd's CRI with sandboxer = \"shim\" for the winproc handler", ConfigTypeURL)
	}
	url := options.GetTypeUrl()
	if !isConfigTypeURL(url) {
		return nil, invalid("the sandbox options are a %q, not a CRI PodSandboxConfig (%s): winproc's sandbox API takes the pod config containerd's CRI sends", url, ConfigTypeURL)
	}
	if len(options.GetValue()) == 0 {
		return nil, invalid("the sandbox options hold an empty PodSandboxConfig: the pod config needs at least metadata (name, namespace, uid)")
	}
	cfg := &runtime.PodSandboxConfig{}
	if err := proto.Unmarshal(options.GetValue(), cfg); err != nil {
		return nil, invalid("the sandbox options are not a valid protobuf-encoded PodSandboxConfig (%v)", err)
	}
	return cfg, nil
}

// isConfigTypeURL accepts the bare full name and any "host/path/" prefix
// before it, as google.protobuf.Any allows.
func isConfigTypeURL(url string) bool {
	if url == ConfigTypeURL {
		return true
	}
	i := strings.LastIndexByte(url, '/')
	return i >= 0 && url[i+1:] == ConfigTypeURL
}

// invalid is an errdefs.ErrInvalidArgument error.
func invalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}
