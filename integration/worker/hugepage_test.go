package worker

import (
	"os"
	"strings"
	"testing"
	"time"
)

// `worker run` leaves its heap to the kernel's page size unless huge_page_heap asks for huge
// pages, and says what it did either way: where the kernel gives them on request (madvise),
// the bytes asked for are advised; elsewhere nothing is.
func TestRunAdvisesHugePagesOnlyWhenAsked(t *testing.T) {
	mode := ""
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		for _, w := range strings.Fields(string(b)) {
			if strings.HasPrefix(w, "[") {
				mode = strings.Trim(w, "[]")
			}
		}
	}
	advised := `"heap_bytes_advised":0` // what 256 MiB asked for comes to on this kernel
	if mode == "madvise" {
		advised = `"heap_bytes_advised":268435456`
	}
	ns := startNATS(t)
	root := initGraph(t)
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, `"heap_bytes_advised":0`},
		{[]string{"--huge-page-heap", "268435456"}, advised},
	} {
		w := startWorker(t, root, ns.url, "", c.extra...)
		w.waitConsuming(t)
		var line string
		for deadline := time.Now().Add(10 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, l := range strings.Split(w.out.String(), "\n") {
				if strings.Contains(l, `"msg":"huge pages"`) {
					line = l
				}
			}
		}
		if !strings.Contains(line, c.want) || !strings.Contains(line, `"kernel":"`+mode+`"`) {
			t.Errorf("run %v, kernel %q: the huge pages line is %q, want %s", c.extra, mode, line, c.want)
		}
		w.terminate(t)
	}
}
