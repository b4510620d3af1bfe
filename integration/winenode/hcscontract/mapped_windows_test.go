//go:build windows

package hcscontract

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/winproc/winproc/internal/winetest"
)

// A MappedDirectory (schema's Container.MappedDirectories) shows its host
// path at its container path, a file as well as a directory (hcsshim
// internal/hcsoci hcsdoc_wcow.go createMountsConfig maps single files),
// at a path whose directories the image lacks: the kubelet's termination
// log, C:\dev\termination-log (k8s.io/kubernetes pkg/kubelet/kuberuntime
// makeMounts), which no Windows base image has a C:\dev for.
func TestMappedFileAndDirectory(t *testing.T) {
	h := load(t)
	vol, dir := volumeDir(t)
	host := winetest.TempDir(t)
	logFile := filepath.Join(host, "termination-log")
	if err := os.WriteFile(logFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(host, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "node.txt"), []byte("the node's"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{
		"Owner": "contract", "SchemaVersion": map[string]int{"Major": 2, "Minor": 1},
		"Container": map[string]any{
			"Storage": map[string]any{"Layers": []any{}, "Path": vol},
			// The first in the schema's order of fields, as hcsshim's
			// hcsschema.MappedDirectory marshals it; the second with
			// its fields the other way round (a JSON object's members
			// are unordered, RFC 8259 section 4).
			"MappedDirectories": []any{
				struct{ HostPath, ContainerPath string }{logFile, `C:\dev\termination-log`},
				map[string]string{"HostPath": data, "ContainerPath": `C:\var\lib\data`},
			},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	h.create(t, "mapped", string(b), true)

	// The container's C:\ is the volume's directory (hcssystem.c).
	if err := os.WriteFile(filepath.Join(dir, `dev\termination-log`), []byte("done"), 0o644); err != nil {
		t.Fatalf("write the mapped file at its container path: %v", err)
	}
	if got, err := os.ReadFile(logFile); err != nil || string(got) != "done" {
		t.Errorf("the host's file after a write at its container path: %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, `var\lib\data\node.txt`)); err != nil || string(got) != "the node's" {
		t.Errorf("the mapped directory's file at its container path: %q, %v", got, err)
	}
}
