package record

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/internal/winetest"
)

type held struct {
	ID      string `json:"id"`
	Scratch string `json:"scratch"`
}

func TestDir(t *testing.T) {
	d := Dir(filepath.Join(winetest.TempDir(t), "state"))
	t.Cleanup(func() {
		for _, name := range []string{"a", "bad"} {
			os.Remove(d.Path(name))
		}
		os.Remove(string(d))
	})
	var h held
	if ok, err := d.Read("a", &h); ok || err != nil {
		t.Fatalf("read before write: %v, %v", ok, err)
	}
	if err := d.Write("a", held{ID: "a", Scratch: `C:\s\1`}); err != nil {
		t.Fatal(err)
	}
	if err := d.Write("a", held{ID: "a", Scratch: `C:\s\2`}); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Read("a", &h); !ok || err != nil || h != (held{ID: "a", Scratch: `C:\s\2`}) {
		t.Fatalf("read = %v %+v, %v", ok, h, err)
	}
	// The write is atomic: no temporary file is left beside the record.
	entries, _ := os.ReadDir(string(d))
	if len(entries) != 1 || entries[0].Name() != "a.json" {
		t.Errorf("state directory holds %v", entries)
	}
	if err := d.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("a"); err != nil {
		t.Errorf("removing a missing record: %v", err)
	}
	if ok, err := d.Read("a", &h); ok || err != nil {
		t.Errorf("read after remove: %v, %v", ok, err)
	}
	if err := os.WriteFile(d.Path("bad"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Read("bad", &h); ok || err == nil {
		t.Errorf("a record that is not JSON: %v, %v", ok, err)
	}
}

func TestNoDir(t *testing.T) {
	var d Dir
	if err := d.Write("a", held{ID: "a"}); err != nil {
		t.Error(err)
	}
	var h held
	if ok, err := d.Read("a", &h); ok || err != nil {
		t.Errorf("read: %v, %v", ok, err)
	}
	if err := d.Remove("a"); err != nil {
		t.Error(err)
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"a", "0", "ctr-1", "pod_1.web", strings.Repeat("a", 200), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"} {
		if err := CheckID(id); err != nil {
			t.Errorf("CheckID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "-a", ".hidden", `a\b`, "a/b", "a:b", "a b", strings.Repeat("a", 201)} {
		if err := CheckID(id); !errdefs.IsInvalidArgument(err) {
			t.Errorf("CheckID(%q) = %v, want invalid", id, err)
		}
	}
}

// A record read while another goroutine rewrites it reads whole, and
// neither side is refused: on Windows the reader's open must share
// delete, and both retry while the other holds the file.
func TestReadWhileWritten(t *testing.T) {
	d := Dir(filepath.Join(winetest.TempDir(t), "state"))
	t.Cleanup(func() {
		os.Remove(d.Path("a"))
		os.Remove(string(d))
	})
	if err := d.Write("a", held{ID: "a", Scratch: "0"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := range 100 {
			if err := d.Write("a", held{ID: "a", Scratch: strconv.Itoa(i)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reads := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("write while read: %v", err)
			}
			t.Logf("%d reads during 100 writes", reads)
			return
		default:
		}
		var h held
		if ok, err := d.Read("a", &h); !ok || err != nil || h.ID != "a" {
			t.Fatalf("read while written: %v %+v, %v", ok, h, err)
		}
		reads++
	}
}

// IDs lists the records, not what a write leaves for a moment.
func TestIDs(t *testing.T) {
	d := Dir(filepath.Join(winetest.TempDir(t), "state"))
	if ids, err := d.IDs(); len(ids) != 0 || err != nil {
		t.Fatalf("IDs of no directory = %v, %v", ids, err)
	}
	t.Cleanup(func() { os.RemoveAll(string(d)) })
	for _, id := range []string{"b", "a"} {
		if err := d.Write(id, held{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(string(d), "c.123.tmp"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ids, err := d.IDs(); strings.Join(ids, ",") != "a,b" || err != nil {
		t.Errorf("IDs = %v, %v", ids, err)
	}
}
