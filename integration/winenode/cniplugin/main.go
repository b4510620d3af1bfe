//go:build windows

// Command cniplugin is the Windows node's test CNI plugin: containerd.exe's
// CRI runs it for a pod's network as it runs any CNI plugin, and it gives
// the pod the host's loopback address. Every process under Wine shares the
// host's network, so that address reaches a pod's listeners, as the pod's
// IP does on a Windows node (containerd.exe's port-forward dials it).
//
// It answers the CNI commands of the spec's 1.0 (ADD with a result, DEL
// and CHECK with nothing, VERSION); the HCN namespace it is given
// (CNI_NETNS) is the HCN stand-in's and holds no endpoint.
//
// It declares the portMappings capability (its network config says so)
// and honours it as Windows' CNI plugins do, where HNS maps each host port
// to the pod's address (win-bridge and win-overlay put the mappings in
// the endpoint's port-mapping policies): ADD starts a forwarder, this
// program run as `cniplugin forward`, that relays each host port's TCP
// connections to the pod's port, and records it; DEL stops it (forward.go).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Address is what ADD gives every pod.
const Address = "127.0.0.1/8"

// podIP is Address without its prefix length: where mapped ports lead.
const podIP = "127.0.0.1"

type config struct {
	CNIVersion    string `json:"cniVersion"`
	RuntimeConfig struct {
		PortMappings []portMapping `json:"portMappings"`
	} `json:"runtimeConfig"`
}

// portMapping is an entry of the portMappings capability (CNI
// CONVENTIONS.md).
type portMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "forward" {
		os.Exit(forwardMain(os.Args[2:]))
	}
	if err := run(os.Getenv("CNI_COMMAND"), os.Stdin, os.Stdout); err != nil {
		json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": err.Error()})
		os.Exit(1)
	}
}

func run(command string, stdin io.Reader, stdout io.Writer) error {
	var cfg config
	if command != "VERSION" {
		if err := json.NewDecoder(stdin).Decode(&cfg); err != nil {
			return fmt.Errorf("read the network config: %w", err)
		}
	}
	switch command {
	case "ADD":
		if os.Getenv("CNI_NETNS") == "" {
			return fmt.Errorf("ADD without CNI_NETNS")
		}
		if err := mapPorts(os.Getenv("CNI_CONTAINERID"), cfg.RuntimeConfig.PortMappings); err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(map[string]any{
			"cniVersion": cfg.CNIVersion,
			"interfaces": []map[string]any{{"name": os.Getenv("CNI_IFNAME")}},
			"ips":        []map[string]any{{"address": Address, "interface": 0}},
		})
	case "DEL":
		return unmapPorts(os.Getenv("CNI_CONTAINERID"))
	case "CHECK", "GC", "STATUS":
		return nil
	case "VERSION":
		return json.NewEncoder(stdout).Encode(map[string]any{
			"cniVersion":        "1.0.0",
			"supportedVersions": []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0"},
		})
	}
	return fmt.Errorf("unknown CNI_COMMAND %q", command)
}
