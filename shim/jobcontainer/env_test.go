package jobcontainer

import (
	"reflect"
	"testing"
)

func TestEnvironment(t *testing.T) {
	const ps, wbem = `C:\Windows\System32\WindowsPowerShell\v1.0`, `C:\Windows\System32\Wbem`
	profile := []string{`Path=C:\Windows\system32;C:\Windows`, `TEMP=C:\Users\u\Temp`, `=C:=C:\x`, `USERNAME=u`}
	for _, tc := range []struct {
		name string
		spec []string
		want []string
	}{
		{"profile, then the container's additions", nil, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\Windows\system32;C:\Windows;` + ps + `;` + wbem,
		}},
		{"the spec over the profile, names without case; NAME= removes", []string{`temp=D:\t`, `USERNAME=`, `A=1`, `a=2`}, []string{
			`temp=D:\t`, `a=2`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\Windows\system32;C:\Windows;` + ps + `;` + wbem,
		}},
		{"a spec PATH keeps the mount point in front, PowerShell once", []string{`PATH=C:\app;` + ps + `\`}, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\app;` + ps + `\;` + wbem,
		}},
		{"the spec cannot move the mount point", []string{`CONTAINER_SANDBOX_MOUNT_POINT=C:\elsewhere`, `PATH=C:\hpc\c1\;C:\x`}, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\x;` + ps + `;` + wbem,
		}},
		{"values expand the mount point", []string{`CONF=%CONTAINER_SANDBOX_MOUNT_POINT%\conf`, `broken`}, []string{
			`TEMP=C:\Users\u\Temp`, `USERNAME=u`, `CONF=C:\hpc\c1\conf`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`,
			`PATH=C:\hpc\c1;C:\Windows\system32;C:\Windows;` + ps + `;` + wbem,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []string(environment(profile, tc.spec, `C:\hpc\c1`, `C:\Windows`))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("environment =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
