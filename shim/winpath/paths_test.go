package winpath

import "testing"

func TestContainerPath(t *testing.T) {
	for in, want := range map[string]string{
		`C:\data`:           `C:\data`,
		`c:/data`:           `C:\data`,
		`c:\\data\\\x\`:     `C:\data\x`,
		`C:\a\.\b\..\c`:     `C:\a\c`,
		`d:`:                `D:`,
		`D:\`:               `D:`,
		`C:\Program Files`:  `C:\Program Files`,
		`z:/deep/er/path/.`: `Z:\deep\er\path`,
	} {
		got, err := ContainerPath(in)
		if err != nil || got != want {
			t.Errorf("ContainerPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
