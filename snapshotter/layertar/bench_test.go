//go:build linux

package layertar

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	benchFiles = 2000
	benchTotal = 200 << 20
)

// writeBenchLayer writes a Windows layer tar of benchFiles files totalling
// benchTotal bytes, in 40 directories, with the usual PAX records.
func writeBenchLayer(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	block := randBytes(7, 1<<20)
	sd := testSD(18)
	mt := time.Unix(1700000000, 0)
	dirPax := map[string]string{paxFileAttr: "16", paxRawSD: sd, paxCreationTime: "1700000000"}
	if err := tw.WriteHeader(&tar.Header{Format: tar.FormatPAX, Name: "Files", Typeflag: tar.TypeDir, Mode: modeDir, ModTime: mt, PAXRecords: dirPax}); err != nil {
		b.Fatal(err)
	}
	size := int64(benchTotal / benchFiles)
	for i := 0; i < benchFiles; i++ {
		if i%50 == 0 {
			hdr := &tar.Header{Format: tar.FormatPAX, Name: fmt.Sprintf("Files/Windows/dir%02d", i/50), Typeflag: tar.TypeDir, Mode: modeDir, ModTime: mt, PAXRecords: dirPax}
			if err := tw.WriteHeader(hdr); err != nil {
				b.Fatal(err)
			}
		}
		hdr := &tar.Header{
			Format: tar.FormatPAX, Name: fmt.Sprintf("Files/Windows/dir%02d/file%04d.dll", i/50, i),
			Typeflag: tar.TypeReg, Mode: modeReg, Size: size, ModTime: mt,
			PAXRecords: map[string]string{paxFileAttr: "32", paxRawSD: sd, paxCreationTime: "1700000000"},
		}
		if err := tw.WriteHeader(hdr); err != nil {
			b.Fatal(err)
		}
		off := (i * 4099) % (len(block) - int(size))
		if _, err := tw.Write(block[off : off+int(size)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkImport times Import against GNU tar extracting the same
// uncompressed layer (2,000 files, 200 MiB) into fresh directories, in
// pairs run back to back, and reports both throughputs and ratio, the
// median of the pairs' tar/ours time ratios (higher is better): on a
// machine shared with others, load that comes and goes moves both runs of
// a pair alike, and a median ignores the pair it caught in between.
func BenchmarkImport(b *testing.B) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		b.Skip("GNU tar not found")
	}
	base := b.TempDir()
	layer := filepath.Join(base, "layer.tar")
	writeBenchLayer(b, layer)
	ctx := context.Background()

	runOurs := func(dir string) time.Duration {
		f, err := os.Open(layer)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		start := time.Now()
		n, err := Import(ctx, f, dir)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if n != benchTotal/benchFiles*benchFiles {
			b.Fatalf("imported %d bytes", n)
		}
		return d
	}
	runTar := func(dir string) time.Duration {
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(tarBin, "-xf", layer, "-C", dir, "--warning=no-unknown-keyword")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("tar: %v: %s", err, out)
		}
		return d
	}

	// Each run starts after a sync, so that neither pays for the other's
	// writeback or deletions; the order alternates too.
	timed := func(run func(string) time.Duration, dir string) time.Duration {
		b.StopTimer()
		unix.Sync()
		b.StartTimer()
		d := run(dir)
		b.StopTimer()
		os.RemoveAll(dir)
		b.StartTimer()
		return d
	}
	var ours, gnu time.Duration
	ratios := make([]float64, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		oursDir, tarDir := filepath.Join(base, fmt.Sprintf("ours%d", i)), filepath.Join(base, fmt.Sprintf("tar%d", i))
		var o, g time.Duration
		if i%2 == 0 {
			o = timed(runOurs, oursDir)
			g = timed(runTar, tarDir)
		} else {
			g = timed(runTar, tarDir)
			o = timed(runOurs, oursDir)
		}
		ours, gnu = ours+o, gnu+g
		ratios[i] = g.Seconds() / o.Seconds()
	}
	slices.Sort(ratios)
	mb := float64(benchTotal) / 1e6 * float64(b.N)
	b.ReportMetric(mb/ours.Seconds(), "ours-MB/s")
	b.ReportMetric(mb/gnu.Seconds(), "tar-MB/s")
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}
