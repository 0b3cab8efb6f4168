// Command printinfo prints buildinfo.Read as `worker version` does, for the package's test.
package main

import (
	"fmt"

	"github.com/omnigraph/omnigraph-worker/internal/buildinfo"
)

func main() { fmt.Println(buildinfo.Read()) }
