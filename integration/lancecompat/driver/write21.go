package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// write21Check runs write21check (Go's 2.1/2.2 files of every shape and size, read back and
// appended to by Lance 8, 10 and 12) and records each of its checks as a case of this suite,
// so that one tally covers both.
func write21Check(ctx context.Context, s *suite) {
	cmd := exec.CommandContext(ctx, "go", "run", "./integration/lancecompat/write21check", "-compat", filepath.Dir(s.script))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	runErr := cmd.Run()
	n := 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		ok := strings.HasPrefix(line, "ok ")
		if !ok && !strings.HasPrefix(line, "FAIL ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		n++
		r := result{Case: fmt.Sprintf("write21check/%s/%s/%s", f[1], f[2], f[3]), OK: ok}
		if !ok {
			r.Error = strings.TrimSpace(line)
		}
		s.record(r)
	}
	if runErr != nil || n == 0 {
		s.add("write21check", fmt.Errorf("write21check: %v, %d checks reported", runErr, n))
	}
}
