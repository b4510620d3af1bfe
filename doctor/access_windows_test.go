//go:build windows

package doctor

import (
	"reflect"
	"testing"

	"golang.org/x/sys/windows"
)

// accessOf over security descriptors as Windows writes them (parsed by
// Windows's own SDDL parser; Wine's under Wine).
func TestAccessOf(t *testing.T) {
	for _, tc := range []struct {
		name, sddl string
		want       DirAccess
	}{
		{"what winproc makes (containerd's)", adminsOnlySDDL, DirAccess{}},
		{"owned by SYSTEM, TrustedInstaller may change it", "O:SYD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464)", DirAccess{}},
		{"ProgramData's default: users read and add", "O:SYD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICIIO;GA;;;CO)(A;OICI;0x1200a9;;;BU)(A;CI;0x116;;;BU)", DirAccess{Change: []string{"S-1-5-32-545"}}},
		{"users read", "O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)(A;OICI;0x1200a9;;;BU)", DirAccess{Read: []string{"S-1-5-32-545"}}},
		{"made by a user first", "O:S-1-5-21-1-2-3-1001D:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)", DirAccess{Owner: "S-1-5-21-1-2-3-1001"}},
		{"a user may change who may use it", "O:BAD:P(A;;GA;;;BA)(A;;WD;;;S-1-5-21-1-2-3-1001)", DirAccess{Change: []string{"S-1-5-21-1-2-3-1001"}}},
		{"a denying entry is no access", "O:BAD:P(D;;GA;;;WD)(A;;GA;;;BA)", DirAccess{}},
		{"users may change what is made in it (inherit-only)", "O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)(A;OICIIO;GA;;;BU)", DirAccess{ChangeMade: []string{"S-1-5-32-545"}}},
		{"users may change files made in it (object inherit only)", "O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)(A;OIIO;FW;;;S-1-5-21-1-2-3-1001)", DirAccess{ChangeMade: []string{"S-1-5-21-1-2-3-1001"}}},
		{"users may change subdirectories made in it, and read it", "O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)(A;OICI;0x1200a9;;;BU)(A;CIIO;GW;;;BU)", DirAccess{Read: []string{"S-1-5-32-545"}, ChangeMade: []string{"S-1-5-32-545"}}},
		{"an inherit-only read is no change", "O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)(A;OICIIO;GR;;;BU)", DirAccess{}},
		{"no access list", "O:BA", DirAccess{Change: []string{"Everyone (the directory has no access list)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd, err := windows.SecurityDescriptorFromString(tc.sddl)
			if err != nil {
				t.Fatal(err)
			}
			got, err := accessOf(sd, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Accounts are named where the host knows them; compare SIDs.
			for _, names := range []*[]string{&got.Change, &got.Read, &got.ChangeMade} {
				for i, n := range *names {
					(*names)[i] = sidOf(t, n)
				}
			}
			if got.Owner != "" {
				got.Owner = sidOf(t, got.Owner)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("accessOf(%s) = %+v, want %+v", tc.sddl, got, tc.want)
			}
		})
	}
}

// sidOf turns an account name back into its SID's string.
func sidOf(t *testing.T, name string) string {
	if _, err := windows.StringToSid(name); err == nil {
		return name
	}
	sid, _, _, err := windows.LookupSID("", name)
	if err != nil {
		return name
	}
	return sid.String()
}
