package worker

import (
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/hugepage"
)

// `worker run` leaves its heap to the kernel's page size unless huge_page_heap asks for huge
// pages, and says what it did either way: where the kernel gives them on request (madvise),
// the bytes asked for are advised; elsewhere nothing is.
func TestRunAdvisesHugePagesOnlyWhenAsked(t *testing.T) {
	mode, err := hugepage.KernelMode()
	if err != nil {
		t.Fatal(err)
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
		w.waitConsuming(t) // the huge pages line comes first, before anything is set up
		var line string
		for _, l := range strings.Split(w.out.String(), "\n") {
			if strings.Contains(l, `"msg":"huge pages"`) {
				line = l
			}
		}
		if !strings.Contains(line, c.want) || !strings.Contains(line, `"kernel":"`+mode+`"`) {
			t.Errorf("run %v, kernel %q: the huge pages line is %q, want %s", c.extra, mode, line, c.want)
		}
		w.terminate(t)
	}
}
