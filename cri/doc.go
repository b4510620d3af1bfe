// Package cri is the CRI side of a winproc pod: it decodes the
// PodSandboxConfig that containerd hands to the shim's sandbox API and
// turns it into the pod settings the shim uses (Pod), refusing, with
// errors that name the pod spec field and the fix, what a Windows
// process-isolated pod cannot do.
//
// The package is pure: no I/O, no HCS, no containerd client; it compiles
// and behaves the same on Linux and Windows.
//
// # What containerd sends
//
// With sandboxer = "shim" for the handler, containerd 2.x's CRI
// (internal/cri/server/sandbox_run.go) calls
//
//	sandboxService.CreateSandbox(ctx, info, sandbox.WithOptions(config), sandbox.WithNetNSPath(netnsPath))
//
// and its shim sandbox controller (plugins/sandbox/controller.go) sends the
// shim a containerd.runtime.sandbox.v1 CreateSandboxRequest with:
//
//   - Options: the kubelet's *runtime.PodSandboxConfig (k8s.io/cri-api
//     runtime/v1) as a google.protobuf.Any made by typeurl.MarshalAny:
//     proto (binary) encoding, type URL "runtime.v1.PodSandboxConfig" (the
//     message's full name, without the "type.googleapis.com/" prefix, since
//     nobody registers the type with typeurl). Decode reads it, and also
//     accepts the prefixed form anypb.New makes.
//   - NetnsPath: where the pod's network is. containerd creates the
//     namespace and runs CNI itself before CreateSandbox (DNS and port
//     mappings go to CNI as capabilities; HNS does the port NAT). On Windows
//     (pkg/netns/netns_windows.go) it is the GUID of an HCN namespace it
//     created, and it is empty for host-network pods, which on Windows are
//     exactly the HostProcess pods (helpers.go hostNetwork()). containerd on
//     Linux (the emulated node) sets a path under /var/run/netns, empty when
//     linux.security_context.namespace_options.network is NODE.
//     FromCreateSandbox and Pod.SetNetworkNamespace record it.
//   - Annotations: nothing (the CRI path never calls
//     sandbox.WithAnnotations). The io.kubernetes.cri.sandbox-id,
//     -namespace, -uid, -name and -log-directory annotations only appear on
//     OCI specs: the pause container's in podsandbox mode, and (all but the
//     log directory) every container's spec in both modes. The pod's own
//     annotations are in PodSandboxConfig.Annotations.
//   - Rootfs: empty, BundlePath: the shim's bundle, SandboxID: the id.
//
// # What the kubelet sends for a Windows pod
//
// The kubelet always fills PodSandboxConfig.Linux, on Windows too (its
// security context holds the namespace options), and fills .Windows on
// Windows. For an ordinary Windows pod it sends: Linux.CgroupParent (may be
// empty), Linux.SecurityContext{Privileged: any container privileged,
// Seccomp: RuntimeDefault (always), NamespaceOptions{Network: POD or NODE,
// Pid: CONTAINER (POD with shareProcessNamespace, NODE with hostPID), Ipc:
// POD or NODE, UsernsOptions: nil or NODE}, SupplementalGroups:
// spec.securityContext.supplementalGroups and volume GID annotations}, an
// empty Linux.Sysctls map; it does not set runAsUser, runAsGroup, fsGroup
// or seLinuxOptions on Windows, nor Overhead/Resources (its
// applySandboxResources is Linux-only). Windows.SecurityContext carries
// RunAsUsername, CredentialSpec (the gMSA spec's JSON content) and
// HostProcess. Hostname is empty for hostNetwork pods.
//
// # Decisions
//
//   - Linux fields: harmless values are accepted (an empty Linux struct,
//     any CgroupParent, seccomp and AppArmor RuntimeDefault or Unconfined,
//     Privileged false, an empty sysctl map, namespace modes POD and
//     CONTAINER for pid and ipc, userns nil or NODE). Set values that cannot
//     apply are refused with errdefs.ErrInvalidArgument naming the pod spec
//     field (spec.hostPID, spec.hostIPC, spec.hostUsers,
//     spec.securityContext.sysctls, .seLinuxOptions, .runAsUser,
//     .runAsGroup, .supplementalGroups, .supplementalGroupsPolicy,
//     .seccompProfile (Localhost), .appArmorProfile (Localhost),
//     spec.containers[*].securityContext.privileged and
//     .readOnlyRootFilesystem); all of a pod's problems come in one error.
//   - shareProcessNamespace cannot be told apart: it is pid mode POD, the
//     proto3 zero value that every config leaving namespace_options.pid
//     unset carries too, and the CRI default. POD is accepted (Windows
//     containers of a pod never see each other's processes); the API
//     server refuses shareProcessNamespace for pods with spec.os.name
//     windows.
//   - hostNetwork (network mode NODE, in the Linux namespace options or the
//     Windows ones, which the kubelet never sets) is accepted and recorded
//     as Network.HostNetwork: containerd on Windows ignores it for
//     non-HostProcess pods and still gives the pod an HCN namespace; on
//     Linux, containerd then makes the pod no network namespace. The pod's
//     network is whatever NetnsPath says.
//   - HostProcess pods (windows.security_context.host_process) are
//     accepted as the kubelet makes them: with the host's network (network
//     mode NODE, else refused naming spec.hostNetwork) and no gMSA (their
//     processes run as host accounts). Their hostname is the node's (none
//     is set); DNS settings and port mappings are recorded, as the host's
//     network does not take them. That every container of a HostProcess pod
//     is HostProcess, and no container of another pod is, is checked at
//     task create from the spec's annotation (shim/specconv).
//   - Hostname: containerd passes config.Hostname verbatim to the spec and
//     hcsshim to HCS. An empty hostname (hostNetwork pods, crictl) defaults
//     to the pod name, cut like the kubelet cuts it (63 characters, no
//     trailing '-' or '.'). A hostname must be DNS labels (letters, digits,
//     '-', each at most 63, not starting or ending with '-') joined by '.',
//     at most 64 characters in all (the kubelet's bound with
//     setHostnameAsFQDN). Windows derives the NetBIOS computer name from the
//     first 15 characters; that is not refused.
//   - DNS: servers must be IP addresses; searches are kept in order as the
//     Windows DNS suffix search list (one domain each, no spaces or commas,
//     as HNS joins them with commas). Options (the kubelet's ndots:5, ...)
//     are resolv.conf options Windows' resolver does not have: recorded as
//     DNS.IgnoredOptions and not applied, never refused, as containerd and
//     runhcs also ignore them on Windows (containerd hands them to CNI).
//   - Port mappings are recorded (protocol, container port, host port, host
//     IP); ports and host IPs are validated, and SCTP with a host port is
//     refused (HNS NAT does TCP and UDP only). A mapping without a host
//     port is only a declaration.
//   - runAsUserName follows the API server's rules (at most 256
//     characters, DOMAIN\user with at most one backslash, user at most 104
//     characters and none of "/\[]:;|=,+*?<>@, no control characters):
//     internal/validation's UserName, which the spec translation applies
//     to every container's user too, so a name is refused at pod and
//     container level alike.
//   - The gMSA credential spec must be a JSON object with
//     DomainJoinConfig.MachineAccountName, as New-CredentialSpec makes it.
//   - Pod resources: WindowsPodSandboxConfig has no resources in cri-api
//     v0.37.0, so Linux.Overhead and Linux.Resources (CPU shares, quota,
//     period, memory limit) are recorded for status; each container's own
//     limits are applied at container create. Their cgroup-only knobs
//     (hugepages, unified, cpusets, OOM score, swap) are ignored.
//
// # Podsandbox mode
//
// With sandboxer = "podsandbox" containerd keeps the PodSandboxConfig and
// gives the shim only the pause container's spec. Its CRI records the
// config on the pause container as the extension
// io.cri-containerd.sandbox.metadata (its versioned sandbox metadata, v1,
// as JSON); FromSandboxMetadata reads it back, and the shim runs
// FromConfig on it at the pause container's task create, so a pod gets
// the same refusals in both modes.
//
// # Status
//
// VerboseInfo builds SandboxStatusResponse.Info for verbose requests. It
// has two keys: "info", in the shape of containerd's podsandbox
// SandboxInfo (containerd's PodSandboxStatus decodes that key into its own
// type and re-encodes it, dropping unknown fields, and fails the whole
// status if it does not decode), and "winproc", the pod settings. crictl
// inspectp shows both as JSON objects.
package cri
