package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/spf13/afero"

	"github.com/omnigraph/omnigraph-worker/storage"
	"github.com/omnigraph/omnigraph-worker/storage/storagetest"
)

// fakeS3 serves an in-memory S3 on 127.0.0.1 and returns the s3:// URI parameters that point
// the real gocloud s3blob driver (AWS SDK v2) at it, and a log of the requests it received.
func fakeS3(t *testing.T, buckets ...string) (query string, reqs *requestLog) {
	t.Helper()
	return fakeS3On(t, s3mem.New(), buckets...)
}

// fakeS3On is fakeS3 on another gofakes3 backend.
func fakeS3On(t *testing.T, backend gofakes3.Backend, buckets ...string) (query string, reqs *requestLog) {
	t.Helper()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	reqs = &requestLog{}
	faker := gofakes3.New(backend)
	srv := httptest.NewUnstartedServer(reqs.wrap(faker.Server()))
	// gofakes3 writes some error headers twice; keep net/http's complaint out of test output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	// Dummy credentials: the fake does not check signatures, but the SDK insists on signing.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	q := url.Values{}
	q.Set("endpoint", srv.URL)
	q.Set("region", "us-east-1")
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	// The fake sends no response checksums; without this the SDK logs a warning per GET.
	q.Set("response_checksum_validation", "when_required")
	return q.Encode(), reqs
}

// requestLog records "METHOD path If-None-Match" for every request the fake receives.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path+" "+r.Header.Get("If-None-Match"))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs
	l.reqs = nil
	return r
}

func TestS3Suite(t *testing.T) {
	query, _ := fakeS3(t, "bucket")
	var seq atomic.Int64
	storagetest.Run(t, func(t *testing.T) storage.Store {
		// One bucket, a fresh prefix per case: also exercises prefix handling on S3.
		return openT(t, fmt.Sprintf("s3://bucket/suite/%d?%s", seq.Add(1), query))
	})
}

// TestS3ListEmptyPrefixOnFilesystemBackend: gofakes3's filesystem backend answers a listing
// under a prefix that holds nothing with NoSuchBucket (real S3 answers an empty page). The
// bucket is there, so the listing is empty, as a worker opening a fresh graph needs (it lists
// __recovery first). (The whole conformance suite does not hold on that backend: it tears reads
// and keeps a file and a directory of one name apart, which no real store does.)
func TestS3ListEmptyPrefixOnFilesystemBackend(t *testing.T) {
	fs, err := s3afero.MultiBucket(afero.NewBasePathFs(afero.NewOsFs(), t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	query, _ := fakeS3On(t, fs, "bucket")
	s := openT(t, "s3://bucket/graph?"+query)
	ctx := t.Context()
	if err := s.Put(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	files, dirs, err := s.ListDir(ctx, "__recovery")
	if err != nil || len(files)+len(dirs) != 0 {
		t.Fatalf("ListDir of an empty prefix = %v %v, %v; want nothing and no error", files, dirs, err)
	}
	if got, err := s.List(ctx, "nothing/here"); err != nil || len(got) != 0 {
		t.Fatalf("List of an empty prefix = %v, %v; want nothing and no error", got, err)
	}
	if files, _, err := s.ListDir(ctx, "a"); err != nil || len(files) != 1 {
		t.Fatalf("ListDir(a) = %v, %v; want a/b", files, err)
	}
	missing := openT(t, "s3://no-such-bucket/graph?"+query)
	if _, _, err := missing.ListDir(ctx, "__recovery"); err == nil {
		t.Fatal("ListDir in a missing bucket: want an error")
	}
}

func TestS3SuiteBucketRoot(t *testing.T) {
	var seq atomic.Int64
	storagetest.Run(t, func(t *testing.T) storage.Store {
		name := fmt.Sprintf("root%d", seq.Add(1))
		query, _ := fakeS3(t, name)
		return openT(t, "s3://"+name+"?"+query)
	})
}

// TestS3ConditionalPutOnTheWire checks what the suite cannot see: that PutIfAbsent really sends
// If-None-Match: * in ONE PUT, that GetIfExists is one GET, and that the fake's 412 is what
// turns into ErrAlreadyExists.
func TestS3ConditionalPutOnTheWire(t *testing.T) {
	query, reqs := fakeS3(t, "bucket")
	s := openT(t, "s3://bucket/t?"+query)
	ctx := t.Context()
	reqs.take()
	if err := s.PutIfAbsent(ctx, "_versions/1.manifest", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if got := reqs.take(); len(got) != 1 || got[0] != "PUT /bucket/t/_versions/1.manifest *" {
		t.Fatalf("PutIfAbsent requests = %q, want one conditional PUT", got)
	}
	err := s.PutIfAbsent(ctx, "_versions/1.manifest", []byte("two"))
	if !errors.Is(err, storage.ErrAlreadyExists) || !strings.Contains(err.Error(), "PreconditionFailed") {
		t.Fatalf("second PutIfAbsent = %v; want ErrAlreadyExists from the server's 412", err)
	}
	reqs.take()
	if data, ok, err := s.GetIfExists(ctx, "_versions/2.manifest"); err != nil || ok || data != nil {
		t.Fatalf("GetIfExists(absent) = %q, %v, %v", data, ok, err)
	}
	if got := reqs.take(); len(got) != 1 || !strings.HasPrefix(got[0], "GET ") {
		t.Fatalf("GetIfExists requests = %q, want exactly one GET", got)
	}
	if err := s.Put(ctx, "plain", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := reqs.take(); len(got) != 1 || got[0] != "PUT /bucket/t/plain " {
		t.Fatalf("Put requests = %q, want one unconditional PUT", got)
	}
}

// TestS3ReplaceOnTheWire: ReplaceIfUnchanged is one PUT with If-Match on the MD5 of the old
// bytes while the store's ETags are MD5s, and still a compare-and-swap (HEAD, GET, PUT
// If-Match on the ETag read) on a store whose ETags are not (SSE-KMS, multipart uploads).
func TestS3ReplaceOnTheWire(t *testing.T) {
	for _, opaque := range []bool{false, true} {
		t.Run(fmt.Sprintf("opaque_etags=%v", opaque), func(t *testing.T) {
			backend := s3mem.New()
			if err := backend.CreateBucket("bucket"); err != nil {
				t.Fatal(err)
			}
			reqs := &requestLog{}
			var h http.Handler = gofakes3.New(backend).Server()
			if opaque {
				h = opaqueETags(h)
			}
			srv := httptest.NewUnstartedServer(reqs.wrap(h))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.Start()
			t.Cleanup(srv.Close)
			query, _ := fakeS3(t) // for the credentials; the endpoint is replaced below
			q, _ := url.ParseQuery(query)
			q.Set("endpoint", srv.URL)
			s := openT(t, "s3://bucket/t?"+q.Encode())
			ctx := t.Context()
			if err := s.Put(ctx, "__recovery/op.json", []byte("armed")); err != nil {
				t.Fatal(err)
			}
			reqs.take()
			if err := s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("armed"), []byte("confirmed")); err != nil {
				t.Fatal(err)
			}
			got := reqs.take()
			want := []string{"PUT /bucket/t/__recovery/op.json "}
			if opaque {
				want = []string{"PUT /bucket/t/__recovery/op.json ", "HEAD /bucket/t/__recovery/op.json ", "GET /bucket/t/__recovery/op.json ",
					"PUT /bucket/t/__recovery/op.json "}
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("requests = %q, want %q", got, want)
			}
			if data, err := s.Get(ctx, "__recovery/op.json"); err != nil || string(data) != "confirmed" {
				t.Fatalf("after the replace: %q, %v", data, err)
			}
			err := s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("armed"), []byte("zombie"))
			if !errors.Is(err, storage.ErrChanged) {
				t.Fatalf("replace of bytes no longer there = %v, want ErrChanged", err)
			}
			if err := s.Delete(ctx, "__recovery/op.json"); err != nil {
				t.Fatal(err)
			}
			err = s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("confirmed"), []byte("zombie"))
			if !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("replace of a removed object = %v, want ErrNotFound", err)
			}
			if ok, err := s.Exists(ctx, "__recovery/op.json"); ok || err != nil {
				t.Fatalf("the replace re-created the removed object: %v, %v", ok, err)
			}
		})
	}
}

// opaqueETags makes the fake answer with ETags that are not the MD5 of the bytes (as S3 does
// for SSE-KMS and multipart objects): a suffix on the way out, taken off a matching If-Match on
// the way in, and an If-Match without it never matches.
func opaqueETags(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := r.Header.Get("If-Match"); m != "" {
			if plain, ok := strings.CutSuffix(strings.Trim(m, `"`), "-kms"); ok {
				r.Header.Set("If-Match", `"`+plain+`"`)
			} else {
				r.Header.Set("If-Match", `"00000000000000000000000000000000"`)
			}
		}
		sw := &etagSuffixWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if !sw.wrote {
			sw.WriteHeader(http.StatusOK) // a HEAD the handler answered with headers alone
		}
	})
}

type etagSuffixWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *etagSuffixWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if e := w.Header().Get("ETag"); e != "" {
		w.Header().Set("ETag", `"`+strings.Trim(e, `"`)+`-kms"`)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *etagSuffixWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// TestS3MissingBucketIsNotAbsent: NoSuchBucket is a 404 too, but it means misconfiguration,
// and reporting "absent" would let a writer believe it may create version 1.
func TestS3MissingBucketIsNotAbsent(t *testing.T) {
	query, _ := fakeS3(t, "bucket")
	s := openT(t, "s3://no-such-bucket?"+query)
	ctx := t.Context()
	if _, ok, err := s.GetIfExists(ctx, "k"); err == nil || ok {
		t.Fatalf("GetIfExists in a missing bucket = %v, %v; want an error", ok, err)
	}
	if _, err := s.Get(ctx, "k"); err == nil || errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get in a missing bucket = %v; want an error that is not ErrNotFound", err)
	}
	// Exists and Delete cannot tell: s3blob answers both with a HEAD, and a HEAD 404 has no
	// body to say NoSuchBucket. Listing can.
	if _, err := s.List(ctx, ""); err == nil {
		t.Fatal("List in a missing bucket: want an error")
	}
}

// TestS3LocationAndURI pins the exact spelling other tools (Lance, aws s3) use.
func TestS3LocationAndURI(t *testing.T) {
	query, _ := fakeS3(t, "bucket")
	s := openT(t, "s3://bucket/a/b/?"+query)
	if got, want := s.Location("c/d.lance"), "s3://bucket/a/b/c/d.lance"; got != want {
		t.Fatalf("Location = %q, want %q", got, want)
	}
	if got, want := s.URI(), "s3://bucket/a/b?"+query; got != want {
		t.Fatalf("URI = %q, want %q", got, want)
	}
	if got := s.Sub("x").Location("y"); got != "s3://bucket/a/b/x/y" {
		t.Fatalf("Sub Location = %q", got)
	}
	if err := s.Put(t.Context(), "c/d.lance", bytes.Repeat([]byte("z"), 10)); err != nil {
		t.Fatal(err)
	}
}

// TestS3SDKLogGoesToWithLog: the AWS SDK's own warnings (here: a GET of a multipart object,
// whose response carries no checksum the SDK can validate) reach the WithLog function, so that
// `worker run` logs them in its JSON instead of the SDK printing plain text to stderr.
func TestS3SDKLogGoesToWithLog(t *testing.T) {
	query, _ := fakeS3(t, "bucket")
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	q.Del("response_checksum_validation") // the SDK's default: validate when supported
	var mu sync.Mutex
	var lines []string
	s, err := storage.Open(t.Context(), "s3://bucket/logged?"+q.Encode(), storage.WithLog(func(level, msg string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, level+" "+msg)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// An object past the multipart threshold comes back without a checksum the SDK checks.
	big := bytes.Repeat([]byte("v"), 17<<20)
	if err := s.Put(t.Context(), "big", big); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), "big"); err != nil || len(got) != len(big) {
		t.Fatalf("get: %d bytes, %v", len(got), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "checksum") {
		t.Fatalf("the SDK's warning did not reach WithLog: %q", lines)
	}
}
