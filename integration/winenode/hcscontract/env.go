package hcscontract

// standinEnv names the environment variable that holds the Windows path of
// the stand-in computecore.dll the Windows tests load.
const standinEnv = "WINPROC_STANDIN_COMPUTECORE"
