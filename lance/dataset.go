// Package lance implements the Lance table format (datasets, versions, transactions, deletion
// files, stable row ids and native branches) over the project's object-store adapter, so that
// the official Lance engine opens what this package writes and this package opens what the
// official engine writes. Data files are encoded by package lance/file.
package lance

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Writer identity recorded in every manifest this package writes. The library name is not
// "lance", so the official engine does not apply its version-specific workarounds to our files.
const (
	WriterLibrary = "omnigraph-lance-go"
	WriterVersion = "0.1.0"
)

// Dataset is an open, immutable view of one version of a Lance dataset on one branch.
// Writes produce a new Dataset value; the old one keeps describing its version.
type Dataset struct {
	root     storage.Store // the dataset root (main branch directory)
	dir      storage.Store // this branch's directory: root itself, or root/tree/<branch>
	branch   string        // "" for main
	scheme   namingScheme
	manifest *Manifest
	key      string        // manifest object key, relative to dir
	size     int64         // manifest file size in bytes
	codes    fragmentCodes // the manifest's encoded fragments, when a commit of ours wrote it
}

// Version is the version this handle reads.
func (d *Dataset) Version() uint64 { return d.manifest.Version }

// Branch is the branch this handle reads ("" for main).
func (d *Dataset) Branch() string { return d.branch }

// Manifest is the decoded manifest of this version. Treat it as read-only.
func (d *Dataset) Manifest() *Manifest { return d.manifest }

// Schema is the table schema of this version.
func (d *Dataset) Schema() *schema.Schema { return d.manifest.Schema }

// CountRows is the number of live rows, from fragment metadata alone.
func (d *Dataset) CountRows() uint64 { return d.manifest.NumRows() }

// URI is where the dataset root lives.
func (d *Dataset) URI() string { return d.root.URI() }

// Store is the dataset root's store.
func (d *Dataset) Store() storage.Store { return d.root }

// OpenOption configures Open.
type OpenOption func(*openConfig)

type openConfig struct {
	branch  string
	version uint64
}

// WithBranch opens a native branch instead of main.
func WithBranch(name string) OpenOption { return func(c *openConfig) { c.branch = name } }

// AtVersion opens a specific version instead of the latest.
func AtVersion(v uint64) OpenOption { return func(c *openConfig) { c.version = v } }

func branchDir(root storage.Store, branch string) storage.Store {
	if branch == "" || branch == "main" {
		return root
	}
	return root.Sub("tree/" + branch)
}

// Open opens the dataset rooted at st: the latest version of main unless options say otherwise.
func Open(ctx context.Context, st storage.Store, opts ...OpenOption) (*Dataset, error) {
	var c openConfig
	for _, o := range opts {
		o(&c)
	}
	if c.branch == "main" {
		c.branch = ""
	}
	d := &Dataset{root: st, dir: branchDir(st, c.branch), branch: c.branch}
	versions, scheme, err := listVersions(ctx, d.dir)
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		if c.branch != "" {
			return nil, &BranchError{Branch: c.branch, Reason: "no such branch"}
		}
		return nil, &VersionNotFoundError{Dataset: st.URI()}
	}
	d.scheme = scheme
	v := versions[len(versions)-1]
	if c.version != 0 {
		v = c.version
	}
	return d.load(ctx, v)
}

// listVersions returns every version in dir/_versions, ascending, and the naming scheme in use.
func listVersions(ctx context.Context, dir storage.Store) ([]uint64, namingScheme, error) {
	files, _, err := dir.ListDir(ctx, versionsDir)
	if err != nil {
		return nil, 0, fmt.Errorf("lance: list versions of %s: %w", dir.URI(), err)
	}
	var vs []uint64
	scheme, seen := namingV2, false
	for _, f := range files {
		name := f.Key[strings.LastIndexByte(f.Key, '/')+1:]
		v, s, ok := parseManifestName(name)
		if !ok {
			continue
		}
		if seen && s != scheme {
			return nil, 0, &FormatError{File: dir.Location(versionsDir), Offset: -1, Reason: "found multiple manifest naming schemes in the same directory"}
		}
		scheme, seen = s, true
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs, scheme, nil
}

// load reads version v of this handle's branch into a new handle.
func (d *Dataset) load(ctx context.Context, v uint64) (*Dataset, error) {
	m, _, key, size, err := readManifest(ctx, d.dir, d.scheme, v)
	if err != nil {
		return nil, err
	}
	return &Dataset{root: d.root, dir: d.dir, branch: d.branch, scheme: d.scheme, manifest: m, key: key, size: size}, nil
}

// readManifest fetches and decodes version v, trying the dataset's naming scheme first.
func readManifest(ctx context.Context, dir storage.Store, scheme namingScheme, v uint64) (*Manifest, []byte, string, int64, error) {
	key := manifestKey(scheme, v)
	b, ok, err := dir.GetIfExists(ctx, key)
	if err == nil && !ok {
		key = manifestKey(1-scheme, v)
		b, ok, err = dir.GetIfExists(ctx, key)
	}
	if err != nil {
		return nil, nil, "", 0, fmt.Errorf("lance: read version %d of %s: %w", v, dir.URI(), err)
	}
	if !ok {
		return nil, nil, "", 0, &VersionNotFoundError{Dataset: dir.URI(), Version: v}
	}
	m, txn, err := parseManifestFile(dir.Location(key), b)
	if err != nil {
		return nil, nil, "", 0, err
	}
	if m.Version != v {
		return nil, nil, "", 0, &FormatError{File: dir.Location(key), Offset: -1, Reason: fmt.Sprintf("manifest says version %d, its name says %d", m.Version, v)}
	}
	if unknown := m.ReaderFlags &^ (flagUnknownFrom - 1); unknown != 0 {
		return nil, nil, "", 0, fmt.Errorf("%w: %s needs reader feature flags %#x", ErrUnsupported, dir.Location(key), unknown)
	}
	if m.StableRowIDs() {
		for i := range m.Fragments {
			if !m.Fragments[i].hasRowIDs() {
				return nil, nil, "", 0, &FormatError{File: dir.Location(key), Offset: -1, Reason: "stable row ids are on but a fragment has no row ids"}
			}
		}
	}
	return m, txn, key, int64(len(b)), nil
}

// Versions lists every version of this handle's branch, ascending.
func (d *Dataset) Versions(ctx context.Context) ([]uint64, error) {
	vs, _, err := listVersions(ctx, d.dir)
	return vs, err
}

// Checkout opens another version of the same branch.
func (d *Dataset) Checkout(ctx context.Context, v uint64) (*Dataset, error) { return d.load(ctx, v) }

// Latest opens the newest version of this handle's branch. It probes forward from the current
// version (one existence check per newer version) instead of listing every manifest, which keeps
// a long-lived single writer cheap on datasets with many versions.
func (d *Dataset) Latest(ctx context.Context) (*Dataset, error) {
	v := d.Version()
	for {
		ok, err := d.dir.Exists(ctx, manifestKey(d.scheme, v+1))
		if err != nil {
			return nil, fmt.Errorf("lance: probe version %d of %s: %w", v+1, d.dir.URI(), err)
		}
		if !ok {
			break
		}
		v++
	}
	if v == d.Version() {
		return d, nil
	}
	return d.load(ctx, v)
}

// ReadTransaction returns the transaction that produced version v of this branch: the inline
// section when the manifest has one, else the _transactions file it names.
func (d *Dataset) ReadTransaction(ctx context.Context, v uint64) (*Transaction, error) {
	m, inline, key, _, err := readManifest(ctx, d.dir, d.scheme, v)
	if err != nil {
		return nil, err
	}
	raw, name := inline, d.dir.Location(key)
	if raw == nil {
		if m.TransactionFile == "" {
			return nil, fmt.Errorf("%w: version %d of %s records no transaction", ErrUnsupported, v, d.dir.URI())
		}
		tkey := "_transactions/" + m.TransactionFile
		name = d.dir.Location(tkey)
		if raw, err = d.dir.Get(ctx, tkey); err != nil {
			return nil, fmt.Errorf("lance: read transaction of version %d: %w", v, err)
		}
	}
	t, err := DecodeTransaction(raw)
	if err != nil {
		return nil, &FormatError{File: name, Offset: -1, Reason: err.Error()}
	}
	return t, nil
}

// resolveBase returns the store that holds a file recorded with baseID, and whether it is a
// dataset root (files under data/, _deletions/) or a plain directory.
func (d *Dataset) resolveBase(baseID *uint32) (storage.Store, bool, error) {
	if baseID == nil {
		return d.dir, true, nil
	}
	bp, ok := d.manifest.basePath(*baseID)
	if !ok {
		return nil, false, &FormatError{File: d.dir.Location(d.key), Offset: -1, Reason: fmt.Sprintf("file names base path %d, which the manifest does not list", *baseID)}
	}
	key, ok := relativeKey(d.root, bp.Path)
	if !ok {
		return nil, false, fmt.Errorf("%w: base path %q lies outside the dataset root %s", ErrUnsupported, bp.Path, d.root.URI())
	}
	return d.root.Sub(key), bp.IsDatasetRoot, nil
}

// relativeKey maps an absolute location (as recorded in base paths) to a directory key under
// root: "" for the root itself.
func relativeKey(root storage.Store, loc string) (string, bool) {
	loc = strings.TrimSuffix(loc, "/")
	if loc == strings.TrimSuffix(root.Location(""), "/") {
		return "", true
	}
	// KeyOf maps objects, not directories: ask for a child and strip it again.
	const probe = "_lance_dir_probe"
	k, ok := root.KeyOf(loc + "/" + probe)
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(strings.TrimSuffix(k, probe), "/"), true
}

func (d *Dataset) dataFileKey(f *DataFile) (storage.Store, string, error) {
	st, isRoot, err := d.resolveBase(f.BaseID)
	if err != nil {
		return nil, "", err
	}
	if isRoot {
		return st, "data/" + f.Path, nil
	}
	return st, f.Path, nil
}

// deletedOffsets returns the sorted deleted row offsets of a fragment.
func (d *Dataset) deletedOffsets(ctx context.Context, fr *Fragment) ([]uint32, error) {
	if fr.Deletion == nil {
		return nil, nil
	}
	st, _, err := d.resolveBase(fr.Deletion.BaseID)
	if err != nil {
		return nil, err
	}
	key := deletionKey(fr.ID, fr.Deletion)
	b, ok := writtenBytes(st.Location(key), -1)
	if !ok {
		var err error
		if b, err = st.Get(ctx, key); err != nil {
			return nil, fmt.Errorf("lance: read deletion file: %w", err)
		}
	}
	return decodeDeletionFile(st.Location(key), fr.Deletion.FileType, b, fr.PhysicalRows)
}

func inject(name string) error { return failpoint.Inject(name) }

// ManifestLocation is the absolute location of this version's manifest file (as another tool
// would name it), with its size in bytes.
func (d *Dataset) ManifestLocation() (string, int64) { return d.dir.Location(d.key), d.size }

// NamingScheme is the manifest naming scheme in Lance's spelling: "V1" or "V2".
func (d *Dataset) NamingScheme() string {
	if d.scheme == namingV1 {
		return "V1"
	}
	return "V2"
}
