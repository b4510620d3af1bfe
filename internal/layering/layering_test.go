// Package layering holds one test: that no package of the module imports a
// package from a floor above its own, as docs/architecture.md's Layering
// table places them. The table is the rule; this test reads it.
package layering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// floors maps a package pattern, relative to the module path, to its floor:
// an import path, or a tree ending in "/...".
type floors map[string]int

// cell matches one backticked pattern of the table's last column.
var cell = regexp.MustCompile("`([^`]+)`")

// readFloors parses the table under "## Layering": rows whose first cell is
// the floor's number and whose last cell lists the packages.
func readFloors(r io.Reader) (floors, error) {
	f := floors{}
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layering"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		n, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		if err != nil {
			continue // the header and its rule
		}
		for _, m := range cell.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			if old, ok := f[m[1]]; ok {
				return nil, fmt.Errorf("pattern %s is on floors %d and %d", m[1], old, n)
			}
			f[m[1]] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(f) == 0 {
		return nil, errors.New("no Layering table")
	}
	return f, nil
}

// of returns the floor of pkg (relative to the module path): that of the
// longest pattern matching it, a package's own name before a tree of the
// same name.
func (f floors) of(pkg string) (int, bool) {
	best, floor := -1, 0
	for pattern, n := range f {
		var score int
		if tree, isTree := strings.CutSuffix(pattern, "/..."); isTree {
			if pkg != tree && !strings.HasPrefix(pkg, tree+"/") {
				continue
			}
			score = 2 * len(tree)
		} else {
			if pkg != pattern {
				continue
			}
			score = 2*len(pattern) + 1
		}
		if score > best {
			best, floor = score, n
		}
	}
	return floor, best >= 0
}

// pkg is what `go list -json` reports of a package.
type pkg struct {
	ImportPath string
	Imports    []string
	Error      *struct{ Err string }
}

// modulePackages lists the module's packages as built for goos, each with
// the module's packages it imports (tests' imports left out), relative to
// the module path.
func modulePackages(t *testing.T, root, module, goos string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list for %s: %v\n%s", goos, err, stderr.Bytes())
	}
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		return strings.CutPrefix(path, module+"/")
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list for %s: %v", goos, err)
		}
		if p.Error != nil {
			t.Fatalf("go list for %s: %s: %s", goos, p.ImportPath, p.Error.Err)
		}
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		var imports []string
		for _, imp := range p.Imports {
			if r, ok := rel(imp); ok {
				imports = append(imports, r)
			}
		}
		pkgs[name] = imports
	}
	return pkgs
}

// check returns every import that reaches up a floor, and every package
// the table does not place.
func (f floors) check(pkgs map[string][]string) []string {
	var problems []string
	for name, imports := range pkgs {
		from, ok := f.of(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is on no floor: add it to the Layering table in docs/architecture.md", name))
			continue
		}
		for _, imp := range imports {
			if to, ok := f.of(imp); ok && to > from {
				problems = append(problems, fmt.Sprintf("%s (floor %d) imports %s (floor %d)", name, from, imp, to))
			}
		}
	}
	return problems
}

func TestNoImportFromAHigherFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the whole module")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root, module, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	doc, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer doc.Close()
	f, err := readFloors(doc)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	for _, goos := range []string{"linux", "windows"} {
		pkgs := modulePackages(t, root, module, goos)
		if len(pkgs) < 20 {
			t.Fatalf("go list for %s found %d packages of %s; want the whole module", goos, len(pkgs), module)
		}
		for _, p := range f.check(pkgs) {
			t.Errorf("%s: %s", goos, p)
		}
	}
}

func TestFloorOf(t *testing.T) {
	f := floors{"shim/...": 3, "shim/hcs": 2, "shim/compute/...": 1, "cmd/...": 4, "cmd/winproc-demo": 5, "demo": 5, "demo/...": 4}
	tests := []struct {
		pkg   string
		floor int
		ok    bool
	}{
		{"shim/task", 3, true},
		{"shim", 3, true},
		{"shim/hcs", 2, true},
		{"shim/hcs/schema2", 3, true},
		{"shim/compute", 1, true},
		{"shim/compute/computetest", 1, true},
		{"shim/computex", 3, true},
		{"cmd/winproc", 4, true},
		{"cmd/winproc-demo", 5, true},
		{"demo", 5, true},
		{"demo/x", 4, true},
		{"winbuild", 0, false},
	}
	for _, tc := range tests {
		if floor, ok := f.of(tc.pkg); floor != tc.floor || ok != tc.ok {
			t.Errorf("floor of %s = %d, %v; want %d, %v", tc.pkg, floor, ok, tc.floor, tc.ok)
		}
	}
	problems := f.check(map[string][]string{
		"shim/hcs":  {"shim/compute", "shim/task"},
		"cmd/x":     {"shim/task"},
		"unplaced":  nil,
		"shim/task": {"cmd/winproc-demo"},
	})
	want := map[string]bool{
		"shim/hcs (floor 2) imports shim/task (floor 3)":                                true,
		"shim/task (floor 3) imports cmd/winproc-demo (floor 5)":                        true,
		"unplaced is on no floor: add it to the Layering table in docs/architecture.md": true,
	}
	if len(problems) != len(want) {
		t.Errorf("problems %q; want %d", problems, len(want))
	}
	for _, p := range problems {
		if !want[p] {
			t.Errorf("unexpected problem %q", p)
		}
	}
}
