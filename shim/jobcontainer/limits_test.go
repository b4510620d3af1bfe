package jobcontainer

import (
	"reflect"
	"testing"

	"github.com/winproc/winproc/shim/compute"
)

func TestLimitsOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    compute.Resources
		want jobLimits
	}{
		{"none", compute.Resources{}, jobLimits{}},
		{"memory in bytes", compute.Resources{MemoryLimitBytes: 300<<20 + 1}, jobLimits{memory: 300<<20 + 1}},
		{"2 of 8 processors", compute.Resources{CPUCount: 2}, jobLimits{cpuFlags: cpuRateEnable | cpuRateHardCap, cpuValue: 2500}},
		{"1 of 64 processors is at least 1", compute.Resources{CPUCount: 1}, jobLimits{cpuFlags: cpuRateEnable | cpuRateHardCap, cpuValue: 1250}},
		{"a maximum", compute.Resources{CPUMaximum: 1500}, jobLimits{cpuFlags: cpuRateEnable | cpuRateHardCap, cpuValue: 1500}},
		{"weight 1", compute.Resources{CPUWeight: 1}, jobLimits{cpuFlags: cpuRateEnable | cpuRateWeightBased, cpuValue: 1}},
		{"weight 5000", compute.Resources{CPUWeight: 5000}, jobLimits{cpuFlags: cpuRateEnable | cpuRateWeightBased, cpuValue: 5}},
		{"weight 10000", compute.Resources{CPUWeight: 10000}, jobLimits{cpuFlags: cpuRateEnable | cpuRateWeightBased, cpuValue: 9}},
		{"affinity", compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 0x3, Group: 1}}}, jobLimits{affinity: []groupAffinity{{Mask: 0x3, Group: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := limitsOf(tc.r, 8); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("limitsOf = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := limitsOf(compute.Resources{CPUCount: 1}, 20000); got.cpuValue != 1 {
		t.Errorf("one of 20000 processors: rate %d, want 1", got.cpuValue)
	}
}
