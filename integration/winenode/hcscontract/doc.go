// Package hcscontract holds the contract tests of the node's stand-in HCS
// (integration/winenode/testdata/standins: computecore.dll, the client, and
// computecore-service.exe, the service): one Windows test per documented
// behaviour, each citing the HCS reference page
// (learn.microsoft.com/virtualization/api/hcs/reference) or the hcsshim
// v0.15.0 file and function it follows, calling the DLL through system
// calls as any HCS client does. contract_wine_test.go builds the stand-ins
// with MinGW and runs them under Wine in a private prefix; the cross-process
// cases run this test binary a second time as another HCS client.
package hcscontract
