//go:build windows

package hcsoci

// This file belongs to winproc (shim/hcs/document_oracle_test.go), not to
// hcsshim. That test copies it into a writable copy of the hcsshim module
// and runs it under Wine, so that runhcs's own document builder makes the
// schema-v2 document of every spec of winproc's corpus. It does what
// runhcs's shim and CreateContainer do for a process-isolated container
// (cmd/containerd-shim-runhcs-v1 createInternal and newHcsTask, then
// CreateContainer, allocateWindowsResources and setupMounts), with the
// parts that need HCS given as inputs: the mounted layers (wclayer's
// activation and NameToGuid) and the Container Credential Guard instance
// (HcsModifyServiceSettings).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Microsoft/go-winio/pkg/fs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"

	"github.com/Microsoft/hcsshim/internal/cmd"
	"github.com/Microsoft/hcsshim/internal/cow"
	hcsschema "github.com/Microsoft/hcsshim/internal/hcs/schema2"
	"github.com/Microsoft/hcsshim/internal/layers"
	"github.com/Microsoft/hcsshim/internal/oci"
	"github.com/Microsoft/hcsshim/internal/processorinfo"
	"github.com/Microsoft/hcsshim/internal/resources"
	"github.com/Microsoft/hcsshim/internal/schemaversion"
	"github.com/Microsoft/hcsshim/internal/uvm"
)

// oracleInputs are what HCS would have answered.
type oracleInputs struct {
	Layers []struct{ ID, Path string }
	Volume string
	CCG    *hcsschema.ContainerCredentialGuardState
	// Owner is runhcs's owner: its shim's binary name.
	Owner string
}

type oracleResult struct {
	Document *hcsschema.ComputeSystem `json:",omitempty"`
	Error    string                   `json:",omitempty"`
	// Process is the init process's parameters, as runhcs's shim starts
	// it (internal/cmd Cmd.Start): stdout always, stderr without a
	// terminal, no stdin.
	Process        *hcsschema.ProcessParameters `json:",omitempty"`
	ProcessError   string                       `json:",omitempty"`
	HostProcessors int32
	// Resolved is what go-winio's fs.ResolvePath made of each mount's
	// source: winproc's backend resolves them with the same function.
	Resolved map[string]string `json:",omitempty"`
}

func TestWinprocOracle(t *testing.T) {
	in, out := os.Getenv("WINPROC_ORACLE_CORPUS"), os.Getenv("WINPROC_ORACLE_OUT")
	if in == "" || out == "" {
		t.Skip("WINPROC_ORACLE_CORPUS and WINPROC_ORACLE_OUT are not set")
	}
	var inputs oracleInputs
	readJSON(t, os.Getenv("WINPROC_ORACLE_INPUTS"), &inputs)
	files, err := filepath.Glob(filepath.Join(in, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no specs in %s: %v", in, err)
	}
	// The mount sources must exist for fs.ResolvePath; what is made for
	// them goes at the end, leaving the Wine prefix as it was.
	var made []string
	t.Cleanup(func() {
		for _, d := range made {
			// An outer directory made earlier may have taken d with it.
			if err := removeTree(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove %s: %v", d, err)
			}
		}
	})
	for _, f := range files {
		var spec specs.Spec
		readJSON(t, f, &spec)
		id := strings.TrimSuffix(filepath.Base(f), ".json")
		res := oracleResult{HostProcessors: processorinfo.ProcessorCount()}
		for _, m := range spec.Mounts {
			if uvm.IsPipe(m.Source) {
				continue
			}
			if top := firstMissing(m.Source); top != "" {
				made = append(made, top)
			}
			if err := os.MkdirAll(m.Source, 0o755); err != nil {
				t.Fatal(err)
			}
			r, err := fs.ResolvePath(m.Source)
			if err != nil {
				t.Fatal(err)
			}
			if res.Resolved == nil {
				res.Resolved = map[string]string{}
			}
			res.Resolved[m.Source] = r
		}
		if spec.Process != nil {
			p, err := runhcsProcess(spec.Process)
			if err != nil {
				res.ProcessError = err.Error()
			}
			res.Process = p
		}
		doc, err := runhcsDocument(id, &spec, inputs)
		if err != nil {
			res.Error = err.Error()
		}
		res.Document = doc
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runhcsDocument(id string, spec *specs.Spec, in oracleInputs) (*hcsschema.ComputeSystem, error) {
	ctx := context.Background()
	if spec.Annotations == nil {
		spec.Annotations = map[string]string{}
	}
	// createInternal.
	if err := oci.ProcessAnnotations(ctx, spec.Annotations); err != nil {
		return nil, err
	}
	coi, err := initializeCreateOptions(ctx, &CreateOptions{ID: id, Owner: in.Owner, Spec: spec})
	if err != nil {
		return nil, err
	}
	// What DetermineSchemaVersion answers on every build Kubernetes
	// supports (RS5 and later); Wine reports an older one.
	coi.actualSchemaVersion = schemaversion.SchemaV21()
	if err := validateContainerConfig(ctx, coi); err != nil {
		return nil, err
	}
	// newHcsTask passes the spec's namespace; configureSandboxNetwork
	// makes it the actual one.
	if spec.Windows != nil && spec.Windows.Network != nil && schemaversion.IsV21(coi.actualSchemaVersion) {
		coi.actualNetworkNamespace = spec.Windows.Network.NetworkNamespace
	}
	// allocateWindowsResources, with the layers mounted.
	if spec.Root == nil {
		spec.Root = &specs.Root{}
	}
	spec.Root.Path = in.Volume
	coi.mountedWCOWLayers = &layers.MountedWCOWLayers{RootFS: in.Volume}
	for _, l := range in.Layers {
		coi.mountedWCOWLayers.MountedLayerPaths = append(coi.mountedWCOWLayers.MountedLayerPaths, layers.MountedWCOWLayer{LayerID: l.ID, MountedPath: l.Path})
	}
	if err := setupMounts(ctx, coi, resources.NewContainerResources(id)); err != nil {
		return nil, err
	}
	if _, ok := spec.Windows.CredentialSpec.(string); ok {
		coi.ccgState = in.CCG
	}
	_, v2, err := createWindowsContainerDocument(ctx, coi)
	if err != nil {
		return nil, err
	}
	// CreateContainer, v2 Argon.
	return &hcsschema.ComputeSystem{
		Owner:                             coi.actualOwner,
		SchemaVersion:                     schemaversion.SchemaV21(),
		ShouldTerminateOnLastHandleClosed: true,
		Container:                         v2,
	}, nil
}

// removeTree removes the directory tree at dir, deepest first: Wine has
// not the call os.RemoveAll makes on Windows.
func removeTree(dir string) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	}); err != nil {
		return err
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if err := os.Remove(paths[i]); err != nil {
			return err
		}
	}
	return nil
}

// firstMissing is the outermost directory of path that does not exist, ""
// when path exists.
func firstMissing(path string) string {
	missing := ""
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			return missing
		}
		missing = p
		if filepath.Dir(p) == p {
			return missing
		}
	}
}

// captureHost is a process host that keeps the parameters it is asked to
// create a process with, and creates none.
type captureHost struct {
	params *hcsschema.ProcessParameters
}

var errCaptured = errors.New("captured")

func (h *captureHost) CreateProcess(_ context.Context, config interface{}) (cow.Process, error) {
	h.params, _ = config.(*hcsschema.ProcessParameters)
	return nil, errCaptured
}

func (h *captureHost) OS() string  { return "windows" }
func (h *captureHost) IsOCI() bool { return false }

// runhcsProcess is the document runhcs's Cmd.Start makes for the process.
func runhcsProcess(p *specs.Process) (*hcsschema.ProcessParameters, error) {
	h := &captureHost{}
	c := &cmd.Cmd{Host: h, Spec: p, Stdout: io.Discard, Log: logrus.NewEntry(logrus.StandardLogger())}
	if !p.Terminal {
		c.Stderr = io.Discard
	}
	if err := c.Start(); !errors.Is(err, errCaptured) {
		return nil, err
	}
	return h.params, nil
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
