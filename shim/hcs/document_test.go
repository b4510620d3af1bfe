package hcs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

var testStorage = mountedStorage{
	layers: []schema2.Layer{{Id: "id-2", Path: `C:\layers\2`}, {Id: "id-1", Path: `C:\layers\1`}},
	volume: `\\?\Volume{6b1f2a3c-4d5e-11ef-9a8b-00155d7f0c21}`,
}

// The document's registry values: the grace period always, process dumps
// when asked for, with {container_id} replaced.
func TestContainerDocumentRegistry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dumps *compute.ProcessDumps
		want  string
	}{
		{"no dumps", nil, `[{"Key":{"Hive":"System","Name":"ControlSet001\\Control"},"Name":"WaitToKillServiceTimeout","Type":"String","StringValue":"2147483647"}]`},
		{"dumps per container", &compute.ProcessDumps{Folder: `C:\dumps\{container_id}`, Type: compute.DumpMini, Count: 3},
			`[{"Key":{"Hive":"System","Name":"ControlSet001\\Control"},"Name":"WaitToKillServiceTimeout","Type":"String","StringValue":"2147483647"},` +
				`{"Key":{"Hive":"Software","Name":"Microsoft\\Windows\\Windows Error Reporting\\LocalDumps"},"Name":"DumpFolder","Type":"String","StringValue":"C:\\dumps\\c1"},` +
				`{"Key":{"Hive":"Software","Name":"Microsoft\\Windows\\Windows Error Reporting\\LocalDumps"},"Name":"DumpType","Type":"DWord","DWordValue":1},` +
				`{"Key":{"Hive":"Software","Name":"Microsoft\\Windows\\Windows Error Reporting\\LocalDumps"},"Name":"DumpCount","Type":"DWord","DWordValue":3}]`},
		{"upper-case variable", &compute.ProcessDumps{Folder: `D:\{CONTAINER_ID}`, Type: compute.DumpFull, Count: 10}, `"StringValue":"D:\\c1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := containerDocument("c1", &compute.Settings{ProcessDumps: tc.dumps}, testStorage, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(doc.Container.RegistryChanges.AddValues)
			if !strings.Contains(string(b), tc.want) {
				t.Errorf("registry values\n%s\nwant\n%s", b, tc.want)
			}
		})
	}
}

// The document of a container without settings: the shape runhcs sends.
func TestContainerDocumentMinimal(t *testing.T) {
	doc, err := containerDocument("c1", &compute.Settings{}, testStorage, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc.Container.RegistryChanges = nil
	b, _ := json.Marshal(doc)
	const want = `{"Owner":"winproc","SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Layers":[{"Id":"id-2","Path":"C:\\layers\\2"},{"Id":"id-1","Path":"C:\\layers\\1"}],"Path":"\\\\?\\Volume{6b1f2a3c-4d5e-11ef-9a8b-00155d7f0c21}\\"},"Processor":{}},"ShouldTerminateOnLastHandleClosed":true}`
	if string(b) != want {
		t.Errorf("document\n%s\nwant\n%s", b, want)
	}
}

// What the document cannot carry is refused, naming the setting.
func TestContainerDocumentRefuses(t *testing.T) {
	ccg := &schema2.ContainerCredentialGuardState{Cookie: "c"}
	for _, tc := range []struct {
		name    string
		s       compute.Settings
		storage mountedStorage
		ccg     *schema2.ContainerCredentialGuardState
		is      func(error) bool
		want    string
	}{
		{"storage not mounted", compute.Settings{}, mountedStorage{}, nil, errdefs.IsInvalidArgument, "storage is not mounted"},
		{"IOPS over int32", compute.Settings{Resources: compute.Resources{StorageIOPSMaximum: 1 << 31}}, testStorage, nil, errdefs.IsInvalidArgument, "HCS takes at most 2147483647"},
		{"bandwidth over int32", compute.Settings{Resources: compute.Resources{StorageBandwidthMaximum: 1 << 40}}, testStorage, nil, errdefs.IsInvalidArgument, "storage limits"},
		{"endpoints", compute.Settings{Network: compute.Network{Endpoints: []string{"ep-1"}}}, testStorage, nil, errdefs.IsNotImplemented, "endpointList (ep-1)"},
		{"gMSA without its instance", compute.Settings{CredentialSpec: `{}`}, testStorage, nil, errdefs.IsInvalidArgument, "Container Credential Guard"},
		{"an instance without gMSA", compute.Settings{}, testStorage, ccg, errdefs.IsInvalidArgument, "Container Credential Guard"},
		{"dumps without a count", compute.Settings{ProcessDumps: &compute.ProcessDumps{Folder: `C:\d`, Type: compute.DumpFull}}, testStorage, nil, errdefs.IsInvalidArgument, "positive count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := containerDocument("c1", &tc.s, tc.storage, tc.ccg)
			if err == nil || !tc.is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one with %q", err, tc.want)
			}
		})
	}
}
