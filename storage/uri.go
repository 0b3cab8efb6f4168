package storage

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// URIError is a root URI that Open refuses before it touches anything: empty, a scheme it does
// not open, a known scheme spelt wrongly ("s3:/bucket", "s3:bucket") or without its bucket or
// name, or parameters the scheme does not take. A local path never starts with a scheme, so
// a mistyped cloud URI is refused rather than taken for a directory to create.
type URIError struct {
	URI    string // as given (a password in it redacted)
	Reason string
}

func (e *URIError) Error() string {
	return fmt.Sprintf("storage: root %q: %s", e.URI, e.Reason)
}

// Schemes are the URI schemes Open takes; anything else with a scheme is refused.
var Schemes = []string{"file", "mem", "s3", "gs", "azblob"}

// uriForms is how each scheme's URI is written, for errors.
var uriForms = map[string]string{
	"file":   "file:///absolute/path",
	"mem":    "mem://name[/prefix]",
	"s3":     "s3://bucket[/prefix][?region=…]",
	"gs":     "gs://bucket[/prefix]",
	"azblob": "azblob://container[/prefix]",
}

// schemePrefix is what RFC 3986 calls a scheme, and its colon, at the start of a root.
var schemePrefix = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*):`)

// CheckURI refuses a root Open would refuse for its form alone (*URIError), without opening
// anything: a plain path (absolute or relative) or file:///path is local, mem://name,
// s3://bucket, gs://bucket and azblob://container (each with an optional /prefix) are the
// others.
func CheckURI(uri string) error {
	_, err := parseURI(uri)
	return err
}

// parseURI is the one reading of a root: nil for a local path, the URL otherwise.
func parseURI(uri string) (*url.URL, error) {
	bad := func(shown, format string, args ...any) error {
		return &URIError{URI: shown, Reason: fmt.Sprintf(format, args...)}
	}
	if uri == "" {
		return nil, bad(uri, "empty: want a local path or a %s URI", schemeList())
	}
	m := schemePrefix.FindStringSubmatch(uri)
	if m == nil {
		return nil, nil // a path: /abs, rel/dir, ./x:y
	}
	scheme := strings.ToLower(m[1])
	_, known := uriForms[scheme]
	if !strings.HasPrefix(uri[len(m[0]):], "//") {
		if known {
			return nil, bad(redact(uri), "malformed %s URI: want %s", scheme, uriForms[scheme])
		}
		return nil, bad(redact(uri), "%q is no scheme this worker opens (%s), and a local path does not start with one (write ./%s for a local directory of that name)",
			m[1], schemeList(), uri)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, bad(redact(uri), "not a URI: %v", err)
	}
	shown := u.Redacted()
	if !known {
		return nil, bad(shown, "unsupported scheme %q: want a local path or a %s URI", u.Scheme, schemeList())
	}
	if u.Fragment != "" || strings.Contains(uri, "#") {
		return nil, bad(shown, "a root takes no #fragment: want %s", uriForms[scheme])
	}
	if u.User != nil {
		return nil, bad(shown, "a root takes no user@ part: want %s", uriForms[scheme])
	}
	switch scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, bad(shown, "file URIs take an absolute path (file:///dir), not host %q", u.Host)
		}
		if u.RawQuery != "" {
			return nil, bad(shown, "file URIs take no parameters")
		}
		if !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return nil, bad(shown, "file URI path must be absolute: want %s", uriForms[scheme])
		}
		return u, nil
	case "mem":
		if u.Host == "" {
			return nil, bad(shown, "mem URIs need a name: want %s", uriForms[scheme])
		}
		if u.RawQuery != "" {
			return nil, bad(shown, "mem URIs take no parameters")
		}
	default:
		if u.Host == "" {
			return nil, bad(shown, "missing %s name: want %s", map[bool]string{true: "container", false: "bucket"}[scheme == "azblob"], uriForms[scheme])
		}
		if u.Query().Has("prefix") {
			return nil, bad(shown, "put the prefix in the path, not in ?prefix=")
		}
	}
	if _, err := cleanPrefix(u.Path); err != nil {
		return nil, bad(shown, "%v", err)
	}
	return u, nil
}

// schemeList is "file://, mem://, s3://, gs:// or azblob://".
func schemeList() string {
	out := make([]string, len(Schemes))
	for i, s := range Schemes {
		out[i] = s + "://"
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

// redact hides a password in a string that may not parse as a URL.
func redact(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		return u.Redacted()
	}
	return uri
}

// LocalPath is the absolute directory of a local root (a path or file:// URI), and false for
// any other root, or one CheckURI refuses.
func LocalPath(uri string) (string, bool) {
	u, err := parseURI(uri)
	switch {
	case err != nil:
		return "", false
	case u == nil:
		p, err := filepath.Abs(uri)
		return p, err == nil
	case u.Scheme == "file":
		return filepath.Clean(filepath.FromSlash(u.Path)), true
	}
	return "", false
}
