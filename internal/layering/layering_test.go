// Package layering holds one test: that every package of the module imports
// only packages from floors below its own, as docs/architecture.md's
// Layering table places them, so that nothing shipped imports a test
// harness. The table is the rule; this test reads it.
package layering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// floors maps a package pattern, relative to the module path, to its floor:
// an import path, or a tree ending in "/...".
type floors map[string]int

// harnessWhat begins the "what" cell of the test harnesses' floor.
const harnessWhat = "test harnesses"

// cell matches one backticked pattern of the table's last column.
var cell = regexp.MustCompile("`([^`]+)`")

// readFloors parses the table under "## Layering": rows whose first cell is
// the floor's number and whose last cell lists the packages. It also
// returns the test harnesses' floor.
func readFloors(r io.Reader) (floors, int, error) {
	f := floors{}
	harness := 0
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
		if strings.HasPrefix(strings.TrimSpace(cells[1]), harnessWhat) {
			harness = n
		}
		for _, m := range cell.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			if old, ok := f[m[1]]; ok {
				return nil, 0, fmt.Errorf("pattern %s is on floors %d and %d", m[1], old, n)
			}
			f[m[1]] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	if len(f) == 0 {
		return nil, 0, errors.New("no Layering table")
	}
	if harness == 0 {
		return nil, 0, fmt.Errorf("no floor of the Layering table is %q", harnessWhat)
	}
	return f, harness, nil
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
func modulePackages(root, module, goos string) (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list for %s: %v\n%s", goos, err, stderr.Bytes())
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
			return nil, fmt.Errorf("decode go list for %s: %w", goos, err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list for %s: %s: %s", goos, p.ImportPath, p.Error.Err)
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
	return pkgs, nil
}

// check returns every import that does not reach down a floor, every
// package the table does not place, and every pattern of the table that
// places no package.
func (f floors) check(pkgs map[string][]string) []string {
	var problems []string
	used := map[string]bool{}
	for name, imports := range pkgs {
		for pattern := range f {
			if matches(pattern, name) {
				used[pattern] = true
			}
		}
		from, ok := f.of(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is on no floor: add it to the Layering table in docs/architecture.md", name))
			continue
		}
		for _, imp := range imports {
			if to, ok := f.of(imp); ok && to >= from {
				problems = append(problems, fmt.Sprintf("%s (floor %d) imports %s (floor %d): a package imports only from floors below its own", name, from, imp, to))
			}
		}
	}
	return problems
}

// stale returns the table's patterns that place none of pkgs.
func (f floors) stale(pkgs map[string][]string) []string {
	var problems []string
	for pattern := range f {
		found := false
		for name := range pkgs {
			if matches(pattern, name) {
				found = true
				break
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("pattern %s of the Layering table places no package", pattern))
		}
	}
	return problems
}

// matches reports whether pattern (a path or a tree ending in "/...")
// places pkg.
func matches(pattern, pkg string) bool {
	if tree, isTree := strings.CutSuffix(pattern, "/..."); isTree {
		return pkg == tree || strings.HasPrefix(pkg, tree+"/")
	}
	return pkg == pattern
}

// graphs holds the module's import graphs, read once for the tests that
// need them.
var graphs struct {
	once    sync.Once
	err     error
	table   floors
	harness int
	byGOOS  map[string]map[string][]string
}

// moduleGraphs reads docs/architecture.md's table and the module's import
// graphs as built for Linux and for Windows.
func moduleGraphs(t *testing.T) (floors, int, map[string]map[string][]string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list on the whole module")
	}
	graphs.once.Do(func() { graphs.err = loadGraphs() })
	if graphs.err != nil {
		t.Fatal(graphs.err)
	}
	return graphs.table, graphs.harness, graphs.byGOOS
}

func loadGraphs() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Path}}").Output()
	if err != nil {
		return fmt.Errorf("go list -m: %w", err)
	}
	root, module, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	doc, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		return err
	}
	defer doc.Close()
	graphs.table, graphs.harness, err = readFloors(doc)
	if err != nil {
		return fmt.Errorf("docs/architecture.md: %w", err)
	}
	graphs.byGOOS = map[string]map[string][]string{}
	for _, goos := range []string{"linux", "windows"} {
		pkgs, err := modulePackages(root, module, goos)
		if err != nil {
			return err
		}
		if len(pkgs) < 20 {
			return fmt.Errorf("go list for %s found %d packages of %s; want the whole module", goos, len(pkgs), module)
		}
		graphs.byGOOS[goos] = pkgs
	}
	return nil
}

func TestNoImportFromAHigherFloor(t *testing.T) {
	f, _, byGOOS := moduleGraphs(t)
	all := map[string][]string{}
	for _, goos := range []string{"linux", "windows"} {
		for _, p := range f.check(byGOOS[goos]) {
			t.Errorf("%s: %s", goos, p)
		}
		for name, imports := range byGOOS[goos] {
			all[name] = append(all[name], imports...)
		}
	}
	for _, p := range f.stale(all) {
		t.Error(p)
	}
}

// The test harnesses are on the floor the table names, and an import of
// any of them from anything shipped (every package below their floor, and
// everything a command reaches) fails the check.
func TestHarnessImportRefused(t *testing.T) {
	f, harness, byGOOS := moduleGraphs(t)
	for _, h := range []string{"internal/winetest", "internal/cgfreezer", "internal/procscan", "internal/syncbuffer", "internal/testwait", "internal/contenttest", "internal/layering", "shim/compute/computetest"} {
		if n, _ := f.of(h); n != harness {
			t.Errorf("test harness %s is on floor %d; want the harnesses' floor %d", h, n, harness)
		}
	}
	for goos, pkgs := range byGOOS {
		var harnesses []string
		shipped := map[string]bool{}
		for name := range pkgs {
			switch n, _ := f.of(name); {
			case n == harness:
				harnesses = append(harnesses, name)
			case n < harness:
				shipped[name] = true
				if strings.HasPrefix(name, "cmd/") {
					reach(pkgs, name, shipped)
				}
			}
		}
		if len(harnesses) == 0 || len(shipped) < 20 {
			t.Fatalf("%s: %d harnesses, %d shipped packages; want both", goos, len(harnesses), len(shipped))
		}
		for s := range shipped {
			for _, h := range harnesses {
				if len(f.check(map[string][]string{s: {h}})) == 0 {
					t.Errorf("%s: an import of test harness %s from shipped %s passes the check", goos, h, s)
				}
			}
		}
	}
	// The import the table once let through.
	task := slices.Clone(byGOOS["linux"]["shim/task"])
	deliberate := maps.Clone(byGOOS["linux"])
	deliberate["shim/task"] = append(task, "internal/winetest")
	want := fmt.Sprintf("shim/task (floor %d) imports internal/winetest (floor %d): a package imports only from floors below its own", must(f.of("shim/task")), harness)
	if problems := f.check(deliberate); !slices.Equal(problems, []string{want}) {
		t.Errorf("problems of shim/task importing internal/winetest: %q; want %q", problems, want)
	}
}

// reach adds to seen every module package pkg imports, directly or not.
func reach(pkgs map[string][]string, pkg string, seen map[string]bool) {
	for _, imp := range pkgs[pkg] {
		if !seen[imp] {
			seen[imp] = true
			reach(pkgs, imp, seen)
		}
	}
}

func must(n int, ok bool) int {
	if !ok {
		panic("no floor")
	}
	return n
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
}

// The checker on a synthetic graph: an import up a floor or on the same
// floor fails, one down passes, an unplaced package and a pattern that
// places nothing are named.
func TestCheck(t *testing.T) {
	f := floors{"shim/compute": 1, "internal/...": 1, "shim/hcs": 2, "shim/emulation": 2, "shim/...": 3, "cmd/...": 4, "internal/winetest": 5, "integration/...": 6, "gone": 1}
	pkgs := map[string][]string{
		"shim/hcs":          {"shim/compute", "shim/task"},
		"shim/emulation":    {"shim/hcs"},
		"cmd/x":             {"shim/task", "internal/winetest"},
		"unplaced":          nil,
		"shim/task":         {"shim/compute", "shim/process"},
		"shim/process":      nil,
		"shim/compute":      nil,
		"internal/winetest": {"shim/compute"},
		"integration/node":  {"internal/winetest", "cmd/x"},
	}
	got := append(f.check(pkgs), f.stale(pkgs)...)
	want := []string{
		"shim/hcs (floor 2) imports shim/task (floor 3): a package imports only from floors below its own",
		"shim/emulation (floor 2) imports shim/hcs (floor 2): a package imports only from floors below its own",
		"cmd/x (floor 4) imports internal/winetest (floor 5): a package imports only from floors below its own",
		"shim/task (floor 3) imports shim/process (floor 3): a package imports only from floors below its own",
		"unplaced is on no floor: add it to the Layering table in docs/architecture.md",
		"pattern gone of the Layering table places no package",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The table's parser: floors, the harnesses' floor, a pattern on two floors.
func TestReadFloors(t *testing.T) {
	doc := "## Layering\n\n| floor | what | packages |\n|---|---|---|\n" +
		"| 1 | leaves | `winbuild`, `internal/...` |\n" +
		"| 2 | test harnesses: x | `internal/winetest` |\n\n## Next\n| 3 | not read | `cmd/...` |\n"
	f, harness, err := readFloors(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := (floors{"winbuild": 1, "internal/...": 1, "internal/winetest": 2}); !maps.Equal(f, want) || harness != 2 {
		t.Errorf("readFloors = %v, %d; want %v, 2", f, harness, want)
	}
	if _, _, err := readFloors(strings.NewReader("## Layering\n| 1 | a | `x` |\n| 2 | test harnesses | `x` |\n")); err == nil {
		t.Error("a pattern on two floors was accepted")
	}
	if _, _, err := readFloors(strings.NewReader("## Layering\n| 1 | a | `x` |\n")); err == nil {
		t.Error("a table with no harnesses' floor was accepted")
	}
}
