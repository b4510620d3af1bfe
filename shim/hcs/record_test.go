package hcs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/winproc/winproc/internal/winetest"
)

func TestRecords(t *testing.T) {
	r := records{dir: filepath.Join(winetest.TempDir(t), "state")}
	t.Cleanup(func() {
		for _, name := range []string{"a", "bad", "other", "empty"} {
			os.Remove(r.path(name))
		}
		os.Remove(r.dir)
	})
	if rec, err := r.read("a"); rec != nil || err != nil {
		t.Fatalf("read before write: %v, %v", rec, err)
	}
	if err := r.write(record{ID: "a", Scratch: `C:\s\1`}); err != nil {
		t.Fatal(err)
	}
	if err := r.write(record{ID: "a", Scratch: `C:\s\2`}); err != nil {
		t.Fatal(err)
	}
	rec, err := r.read("a")
	if err != nil || rec == nil || *rec != (record{ID: "a", Scratch: `C:\s\2`}) {
		t.Fatalf("read = %+v, %v", rec, err)
	}
	entries, _ := os.ReadDir(r.dir)
	if len(entries) != 1 || entries[0].Name() != "a.json" {
		t.Errorf("state directory holds %v", entries)
	}
	if err := r.remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := r.remove("a"); err != nil {
		t.Errorf("removing a missing record: %v", err)
	}
	if rec, err := r.read("a"); rec != nil || err != nil {
		t.Errorf("read after remove: %v, %v", rec, err)
	}

	// A record that is not one is an error, not a scratch to release.
	for name, content := range map[string]string{
		"bad":   "{",
		"other": `{"id":"someone-else","scratch":"C:\\x"}`,
		"empty": `{"id":"empty"}`,
	} {
		if err := os.WriteFile(r.path(name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if rec, err := r.read(name); rec != nil || err == nil {
			t.Errorf("record %s: %v, %v", name, rec, err)
		}
	}
}

func TestNoRecords(t *testing.T) {
	var r records
	if err := r.write(record{ID: "a", Scratch: "s"}); err != nil {
		t.Error(err)
	}
	if rec, err := r.read("a"); rec != nil || err != nil {
		t.Errorf("read: %v, %v", rec, err)
	}
	if err := r.remove("a"); err != nil {
		t.Error(err)
	}
}
