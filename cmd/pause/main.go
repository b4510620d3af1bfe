// Command pause is the infrastructure process of a winproc pod (pause.exe).
package main

import (
	"context"
	"os"

	"github.com/winproc/winproc/internal/version"
	"github.com/winproc/winproc/pause"
)

func main() {
	os.Exit(pause.Run(context.Background(), os.Args[1:], version.Version, os.Stdout, os.Stderr))
}
