package doctor

import (
	"strings"
	"testing"
)

func TestCheckHostProcess(t *testing.T) {
	inherit := []string{"microsoft.com/hostprocess-inherit-user"}
	for _, tc := range []struct {
		name           string
		goos           string
		defaultRuntime string
		podAnnotations []string
		status         Status
		summary        string
		fix            string
	}{
		{"the default handler", "windows", "winproc", inherit, OK, "winproc is the default handler", ""},
		{"containerd's default on Windows", "windows", "", inherit, OK, "the default handler is runhcs-wcow-process: HostProcess pods run on winproc only with runtimeClassName winproc", ""},
		{"another default", "linux", "runc", inherit, OK, "the default handler is runc", ""},
		{"inherit-user not passed", "windows", "winproc", nil, Warn, "does not pass the pod annotation microsoft.com/hostprocess-inherit-user", `add "microsoft.com/hostprocess-inherit-user" to pod_annotations`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &run{goos: tc.goos, o: Options{Handler: "winproc"}, cfg: &Config{DefaultRuntime: tc.defaultRuntime}, rt: &Runtime{PodAnnotations: tc.podAnnotations}}
			d.checkHostProcess()
			r := d.report.Checks[0]
			text := r.Summary + "\n" + strings.Join(r.Details, "\n")
			if r.Status != tc.status || !strings.Contains(text, tc.summary) {
				t.Errorf("%s %q %q; want %s with %q", r.Status, r.Summary, r.Details, tc.status, tc.summary)
			}
			if fix := strings.Join(r.Fix, "\n"); !strings.Contains(fix, tc.fix) || (tc.fix == "") != (fix == "") {
				t.Errorf("fix %q, want %q", fix, tc.fix)
			}
		})
	}
	d := &run{o: Options{Handler: "winproc"}}
	d.checkHostProcess()
	if r := d.report.Checks[0]; r.Status != Warn || !strings.Contains(r.Summary, "not checked") {
		t.Errorf("without the handler: %s %q", r.Status, r.Summary)
	}
}
