// Command worker is the omnigraph-worker binary. The Lance storage core is in place; the graph
// engine and the JetStream ingestion worker arrive with the next issues.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("omnigraph-worker (Lance core only)")
		return
	}
	fmt.Fprintln(os.Stderr, "omnigraph-worker: the worker is not built yet. This build has the Lance table format core")
	fmt.Fprintln(os.Stderr, "(packages lance/ and storage/); the graph engine and the JetStream worker come next.")
	fmt.Fprintln(os.Stderr, "Try: make test, make lance-compat, make bench.")
}
