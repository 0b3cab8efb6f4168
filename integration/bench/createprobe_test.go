package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestCreateCostKeepsItsFiles(t *testing.T) {
	parent := t.TempDir()
	for range 2 {
		d, err := createCost(parent)
		if err != nil {
			t.Fatal(err)
		}
		if d <= 0 {
			t.Fatalf("a creation took %v", d)
		}
	}
	// Each probe has a directory of its own, and its files stay: removing them would free
	// the inodes whose skipping the probe measures.
	probes, err := os.ReadDir(filepath.Join(parent, "create-probe"))
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 2 {
		t.Fatalf("%d probe directories, want 2", len(probes))
	}
	for _, probe := range probes {
		entries, err := os.ReadDir(filepath.Join(parent, "create-probe", probe.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != createProbeFiles {
			t.Fatalf("probe %s left %d files, want %d", probe.Name(), len(entries), createProbeFiles)
		}
	}
}

func TestCreateCostFailsWhereItCannotCreate(t *testing.T) {
	t.Run("parent is a file", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "a-file")
		if err := os.WriteFile(parent, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if _, err := createCost(parent); err == nil {
			t.Fatal("a probe under a regular file succeeded")
		}
	})
	t.Run("a file of the probe exists", func(t *testing.T) {
		parent := t.TempDir()
		next := filepath.Join(parent, "create-probe", strconv.FormatInt(createProbeSeq.Load()+1, 10))
		if err := os.MkdirAll(next, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(next, "3"), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if _, err := createCost(parent); err == nil {
			t.Fatal("a probe whose file already existed succeeded")
		}
	})
}
