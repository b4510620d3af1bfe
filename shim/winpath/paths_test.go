package winpath

import (
	"reflect"
	"testing"
)

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

func TestSystemDrivePath(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`C:\pause.exe`, []string{"pause.exe"}},
		{`c:\Windows\System32\wincat.exe`, []string{"Windows", "System32", "wincat.exe"}},
		{`C:/pause.exe`, []string{"pause.exe"}},
		{`/pause.exe`, []string{"pause.exe"}},
		{`\pause.exe`, []string{"pause.exe"}},
		{`\\?\C:\pause.exe`, []string{"pause.exe"}},
		{`C:\a\.\b\..\..\pause.exe`, []string{"pause.exe"}},
		{`C:\..\pause.exe`, []string{"pause.exe"}},
		{`C:\\dir\\x.exe`, []string{"dir", "x.exe"}},
		{`pause.exe`, nil},
		{`bin\pause.exe`, nil},
		{`C:pause.exe`, nil},
		{`D:\pause.exe`, nil},
		{`\\server\share\pause.exe`, nil},
		{`C:\`, nil},
		{``, nil},
	}
	for _, tc := range tests {
		got, ok := SystemDrivePath(tc.in)
		if ok != (tc.want != nil) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SystemDrivePath(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
