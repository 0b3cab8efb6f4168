package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// readSchema reads the .pg schema at path and compiles it, so that a schema that does not
// compile is refused, naming path, before any root is made for it.
func readSchema(path string) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("schema: %w", err)
	}
	if _, err := pg.CompileFile(path, string(src)); err != nil {
		return "", err
	}
	return string(src), nil
}

// schemaFileError is err with the schema's errors naming path rather than the file name the
// compiler gives a source it was not told the name of.
func schemaFileError(path string, err error) error {
	var pe *pg.ParseError
	var se *pg.SemanticError
	switch {
	case errors.As(err, &pe) && pe.File == pg.DefaultFileName:
		pe.File = path
	case errors.As(err, &se) && se.File == pg.DefaultFileName:
		se.File = path
	}
	return err
}
