package layercontract

const (
	// standinEnv holds the Windows path of the stand-in vmcompute.dll.
	standinEnv = "WINPROC_STANDIN_VMCOMPUTE"
	// rootEnv holds a Windows path of a directory the tests make layers in.
	rootEnv = "WINPROC_STANDIN_LAYER_ROOT"
)
