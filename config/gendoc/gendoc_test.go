package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGenerated fails when docs/configuration.md differs from what the generator writes:
// run `go run ./config/gendoc` and commit the result.
func TestGenerated(t *testing.T) {
	const path = "../../docs/configuration.md"
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `go run ./config/gendoc` from the repository root", err)
	}
	if want := render(); !bytes.Equal(got, want) {
		t.Fatalf("%s is not what config/gendoc generates from the settings: run `go run ./config/gendoc` from the repository root and commit it", path)
	}
}

// TestEverySetting: each setting has its flag, variable and a description in the table.
func TestEverySetting(t *testing.T) {
	doc := string(render())
	for _, r := range rows() {
		for _, s := range []string{"`" + r.key + "`", "`" + r.flag + "`", "`" + r.env + "`"} {
			if !bytes.Contains([]byte(doc), []byte(s)) {
				t.Errorf("setting %s: %s is not in the generated reference", r.name, s)
			}
		}
		if r.help == "" {
			t.Errorf("setting %s has no description", r.name)
		}
	}
}
