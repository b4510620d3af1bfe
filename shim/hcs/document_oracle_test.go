//go:build linux

package hcs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/hcs/schema2"
	"github.com/winproc/winproc/shim/specconv"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// The differential test of the container document: for every spec of the
// corpus (testdata/corpus, the specs containerd's CRI makes for realistic
// pods; `make spec-corpus` writes it), the schema-v2 document winproc sends
// must equal the one runhcs's own builder makes, field by field, but for
// the differences listed in documentDifferences. runhcs's builder runs as
// the oracle: testdata/oracle/winproc_oracle_test.go, built as a Windows
// test inside a writable copy of the hcsshim module this module requires,
// and run under Wine.

// oracleInputs stand for what HCS answers, the same for both builders: the
// image layers with their ids (NameToGuid), the scratch volume, and the
// Container Credential Guard instance of a gMSA container.
var oracleInputs = struct {
	Layers []struct{ ID, Path string }
	Volume string
	CCG    *schema2.ContainerCredentialGuardState
	Owner  string
}{
	Layers: []struct{ ID, Path string }{
		{"8b2a61d3-5e0b-5b6e-a5d9-2c6f3e1f0a11", `C:\ProgramData\containerd\root\io.containerd.snapshotter.v1.windows\snapshots\12`},
		{"2f6d0c4e-9a7b-5c3d-8e1f-4a5b6c7d8e9f", `C:\ProgramData\containerd\root\io.containerd.snapshotter.v1.windows\snapshots\3`},
	},
	Volume: `\\?\Volume{6b1f2a3c-4d5e-11ef-9a8b-00155d7f0c21}\`,
	CCG: &schema2.ContainerCredentialGuardState{
		Cookie:         "ZmFrZSBjb29raWU=",
		RpcEndpoint:    "ccg-endpoint-1",
		Transport:      "ALPC",
		CredentialSpec: `{"CmsPlugins":["ActiveDirectory"]}`,
	},
	Owner: "containerd-shim-runhcs-v1.exe",
}

// A difference is a field where winproc's document differs from runhcs's
// on purpose; MAPPING.md gives the same lists. It applies to the corpus
// specs whose name contains specs (every spec when empty) and to the
// fields matching field.
type difference struct {
	field, specs, reason string
}

// documentDifferences are the container document's.
var documentDifferences = []difference{
	{`^Owner$`, "", "the owner is the management stack's name: winproc's is winproc, runhcs's is its shim's binary name"},
	{`^Container\.Memory\.SizeInMB$`, "memory-odd", "a memory limit that is not a whole number of MiB is rounded up by winproc and down by runhcs (which makes a limit under 1 MiB no limit)"},
	{`^Container\.MappedDirectories\[\d+\]\.ContainerPath$`, "mount-propagation", `winproc normalises a container path (c:\cache\ becomes C:\cache) and refuses two mounts on one path; runhcs passes it as given`},
	{`^Container\.MappedDirectories\[\d+\]\.ContainerPath$`, "ctr-web-", `the kubelet makes its termination log's destination c:/dev/termination-log (pkg/volume/util MakeAbsolutePath adds "c:"), which reaches the shim as c:\dev\termination-log; winproc normalises it to C:\dev\termination-log, runhcs passes it as given`},
}

// processDifferences are the init process's parameters'.
var processDifferences = []difference{
	{`^Environment\.`, "env-case", "Windows environment names are case-insensitive: of two spellings of one name (Path and PATH, which containerd keeps apart) winproc keeps the later entry, as the spec orders them; runhcs sends both, and which a program sees is up to Windows"},
}

// corpora are the differential test's corpora: the specs the emulated
// node's Linux CRI makes, and those containerd.exe's own Windows CRI makes
// on the Windows node under Wine (both written by `make spec-corpus`).
var corpora = []struct {
	dir string
	min int
}{{"corpus", 50}, {"corpus-wincri", 30}, {"corpus-kubelet", 3}}

func TestDocumentMatchesRunhcs(t *testing.T) {
	prefix := winetest.Prefix(t)
	used, usedProcess := map[int]bool{}, map[int]bool{}
	for _, c := range corpora {
		t.Run(c.dir, func(t *testing.T) {
			n, compared, processFields := matchCorpus(t, prefix, c.dir, c.min, used, usedProcess)
			t.Logf("%d specs: %d fields of the container document compared (%d listed differences), %d of the init process's parameters (%d listed differences)",
				n, compared, len(documentDifferences), processFields, len(processDifferences))
		})
	}
	for _, l := range []struct {
		diffs []difference
		used  map[int]bool
	}{{documentDifferences, used}, {processDifferences, usedProcess}} {
		for i, d := range l.diffs {
			if !l.used[i] {
				t.Errorf("listed difference %s (%s) never showed: remove it from the list and MAPPING.md", d.field, d.reason)
			}
		}
	}
}

// matchCorpus compares winproc's documents with runhcs's for every spec of
// testdata/<dir>, marking the listed differences that showed; it returns
// the number of specs and of the fields compared.
func matchCorpus(t *testing.T, prefix, dir string, min int, used, usedProcess map[int]bool) (n, compared, processFields int) {
	corpus, err := filepath.Abs(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(corpus, "*.json"))
	if err != nil || len(names) < min {
		t.Fatalf("testdata/%s has %d specs, want at least %d (make spec-corpus): %v", dir, len(names), min, err)
	}
	oracle := runOracle(t, prefix, corpus)

	var layers []schema2.Layer
	var parents []string
	for _, l := range oracleInputs.Layers {
		layers = append(layers, schema2.Layer{Id: l.ID, Path: l.Path})
		parents = append(parents, l.Path)
	}
	rootfs := []mount.Mount{layermount.Layer{Path: `C:\ProgramData\containerd\root\io.containerd.snapshotter.v1.windows\snapshots\13`, Parents: parents}.Mount()}
	st := mountedStorage{layers: layers, volume: oracleInputs.Volume}

	for _, path := range names {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			var spec specs.Spec
			readTestJSON(t, path, &spec)
			var want struct {
				Document       json.RawMessage
				Error          string
				Process        json.RawMessage
				ProcessError   string
				HostProcessors int
				Resolved       map[string]string
			}
			readTestJSON(t, filepath.Join(oracle, name+".json"), &want)

			s, ps, err := specconv.FromSpec(&spec, rootfs, want.HostProcessors)
			if err == nil && want.ProcessError == "" {
				// As the shim connects the init process: stdout, and
				// stderr without a terminal.
				ps.Stdout = io.Discard
				if !ps.Terminal {
					ps.Stderr = io.Discard
				}
				pp, err := processParameters(ps)
				if err != nil {
					t.Fatalf("process parameters: %v", err)
				}
				got, _ := json.Marshal(pp)
				n, u := compareDocuments(t, "process ", name, got, want.Process, processDifferences)
				processFields += n
				for i := range u {
					usedProcess[i] = true
				}
			}
			var doc *schema2.ComputeSystem
			if err == nil {
				// As the backend resolves them, with the same function.
				for i, d := range s.MappedDirectories {
					s.MappedDirectories[i].HostPath = want.Resolved[d.HostPath]
				}
				var ccg *schema2.ContainerCredentialGuardState
				if s.CredentialSpec != "" {
					ccg = oracleInputs.CCG
				}
				doc, err = containerDocument(name, s, st, ccg)
			}
			switch {
			case err != nil && want.Error != "":
				t.Logf("both refuse: winproc %v; runhcs %s", err, want.Error)
				return
			case err != nil:
				t.Fatalf("winproc refuses what runhcs takes: %v", err)
			case want.Error != "":
				t.Fatalf("winproc takes what runhcs refuses (%s)", want.Error)
			}
			got, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			n, u := compareDocuments(t, "", name, got, want.Document, documentDifferences)
			compared += n
			for i := range u {
				used[i] = true
			}
		})
	}
	return len(names), compared, processFields
}

// compareDocuments compares winproc's document got with runhcs's want,
// field by field, reporting every difference not listed in diffs; it
// returns the number of fields compared and the listed differences that
// showed.
func compareDocuments(t *testing.T, what, spec string, got, want []byte, diffs []difference) (int, map[int]bool) {
	t.Helper()
	used := map[int]bool{}
	g, w := flatten(t, got), flatten(t, want)
	fields := slices.Sorted(maps.Keys(union(g, w)))
	for _, f := range fields {
		if g[f] == w[f] {
			continue
		}
		if i := differenceFor(diffs, f, spec); i >= 0 {
			used[i] = true
			continue
		}
		t.Errorf("%s%s: winproc %s, runhcs %s", what, f, orMissing(g[f]), orMissing(w[f]))
	}
	return len(fields), used
}

func differenceFor(diffs []difference, field, spec string) int {
	for i, d := range diffs {
		if regexp.MustCompile(d.field).MatchString(field) && strings.Contains(spec, d.specs) {
			return i
		}
	}
	return -1
}

func orMissing(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

func union(a, b map[string]string) map[string]string {
	u := maps.Clone(a)
	maps.Copy(u, b)
	return u
}

// flatten maps every leaf of a JSON document to its value, by path:
// Container.Storage.Layers[0].Id.
func flatten(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out[path] = "{}"
			}
			for k, e := range x {
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		default:
			b, _ := json.Marshal(x)
			out[path] = string(b)
		}
	}
	walk("", v)
	return out
}

func readTestJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// runOracle builds testdata/oracle as a test of hcsshim's internal/hcsoci,
// in a writable copy of the hcsshim module this module requires, runs it
// under Wine over the corpus, and returns the directory of its documents.
// The copy is kept (next to the tools when WINPROC_TOOLS is set) so that
// the build is cached.
func runOracle(t *testing.T, prefix, corpus string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/Microsoft/hcsshim").Output()
	if err != nil {
		t.Fatalf("find the hcsshim module: %v", err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	cache := os.Getenv("WINPROC_TOOLS")
	if cache != "" {
		cache = filepath.Dir(cache)
	} else if cache, err = os.UserCacheDir(); err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(cache, "oracle", "hcsshim@"+version)
	if _, err := os.Stat(filepath.Join(copyDir, "go.mod")); err != nil {
		tmp := copyDir + ".tmp"
		os.RemoveAll(tmp)
		for _, args := range [][]string{{"mkdir", "-p", filepath.Dir(copyDir)}, {"cp", "-R", dir, tmp}, {"chmod", "-R", "u+w", tmp}, {"mv", tmp, copyDir}} {
			if b, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, b)
			}
		}
	}
	src, err := os.ReadFile(filepath.Join("testdata", "oracle", "winproc_oracle_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	// The Go module proxy does not serve cosesign1go, which hcsshim's
	// security policy package (of confidential utility VMs, never called
	// here) needs to compile: the copy uses testdata/oracle/cosesign1go.
	stub, err := filepath.Abs(filepath.Join("testdata", "oracle", "cosesign1go"))
	if err != nil {
		t.Fatal(err)
	}
	edit := exec.CommandContext(ctx, "go", "mod", "edit", "-replace", "github.com/Microsoft/cosesign1go="+stub)
	edit.Dir = copyDir
	if b, err := edit.CombinedOutput(); err != nil {
		t.Fatalf("go mod edit: %v\n%s", err, b)
	}
	pkg := filepath.Join(copyDir, "internal", "hcsoci")
	if err := os.WriteFile(filepath.Join(pkg, "winproc_oracle_test.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "oracle.exe")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", exe, ".")
	build.Dir = pkg
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build runhcs's document builder as the oracle: %v\n%s", err, b)
	}

	results := t.TempDir()
	inputs := filepath.Join(t.TempDir(), "inputs.json")
	b, err := json.Marshal(oracleInputs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inputs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestWinprocOracle$", "-test.v")
	cmd.Env = append(cmd.Env, "WINPROC_ORACLE_CORPUS="+winPath(corpus), "WINPROC_ORACLE_OUT="+winPath(results), "WINPROC_ORACLE_INPUTS="+winPath(inputs))
	b, err = cmd.CombinedOutput()
	if code, cerr := winetest.ExitCode(err); cerr != nil || code != 0 {
		t.Fatalf("the oracle under Wine: %v\n%s", err, b)
	}
	t.Logf("the oracle under Wine:\n%s", b)
	return results
}

// winPath is a Linux path as Wine's Z: drive shows it.
func winPath(p string) string { return "Z:" + strings.ReplaceAll(p, "/", `\`) }
