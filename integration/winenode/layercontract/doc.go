// Package layercontract holds the contract tests of the node's stand-in
// vmcompute.dll (integration/winenode/testdata/standins/vmcompute.c): one
// Windows test case per behaviour winproc and hcsshim rely on, each citing
// the hcsshim v0.15.0 file and function it follows, calling the DLL's
// exports through system calls with the signatures of hcsshim's
// internal/wclayer (and of hnslib's hcn for HNSCall, which the kubelet's
// /stats/summary reaches). contract_wine_test.go builds the stand-in with MinGW
// and runs the cases under Wine in a private prefix.
package layercontract
