package lance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/omnigraph/omnigraph-worker/storage"
)

const refsBranchesDir = "_refs/branches/"

// VersionMapping is one element of a branch identifier: the parent version the branch (or one
// of its ancestors) was forked at, and the uuid minted for that fork. A branch deleted and
// re-created under the same name gets a new uuid, which is how incarnations are told apart.
type VersionMapping struct {
	ParentVersion uint64
	UUID          string // 32 lowercase hex digits
}

// BranchIdentifier identifies one incarnation of a branch; main's is empty.
type BranchIdentifier []VersionMapping

// Equal reports whether two identifiers name the same incarnation.
func (b BranchIdentifier) Equal(o BranchIdentifier) bool {
	if len(b) != len(o) {
		return false
	}
	for i := range b {
		if b[i] != o[i] {
			return false
		}
	}
	return true
}

func (b BranchIdentifier) MarshalJSON() ([]byte, error) {
	pairs := make([][2]any, len(b))
	for i, m := range b {
		pairs[i] = [2]any{m.ParentVersion, m.UUID}
	}
	return json.Marshal(struct {
		VersionMapping [][2]any `json:"version_mapping"`
	}{pairs})
}

func (b *BranchIdentifier) UnmarshalJSON(data []byte) error {
	var raw struct {
		VersionMapping [][2]json.RawMessage `json:"version_mapping"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	out := make(BranchIdentifier, 0, len(raw.VersionMapping))
	for _, p := range raw.VersionMapping {
		var m VersionMapping
		if err := json.Unmarshal(p[0], &m.ParentVersion); err != nil {
			return err
		}
		if err := json.Unmarshal(p[1], &m.UUID); err != nil {
			return err
		}
		out = append(out, m)
	}
	*b = out
	return nil
}

// BranchRef is the content of _refs/branches/<name>.json (lance 8's camelCase keys).
type BranchRef struct {
	ParentBranch  *string           `json:"parentBranch"`
	Identifier    BranchIdentifier  `json:"identifier"`
	ParentVersion uint64            `json:"parentVersion"`
	CreateAt      int64             `json:"createAt"`
	ManifestSize  int64             `json:"manifestSize"`
	Metadata      map[string]string `json:"metadata"`
}

// Branch is a listed branch.
type Branch struct {
	Name string
	Ref  BranchRef
}

// MaxBranchNameBytes bounds a branch name so that every key it becomes part of can be stored:
// its ref file is one path segment, _refs/branches/<name>.json with each "/" written as %2F,
// written on a local root through a temporary "<file>#<up to 20 digits>", and a local file
// system refuses a segment over 255 bytes (ENAMETOOLONG). At 100 bytes even a name of
// one-letter segments (49 slashes, two bytes more each) stays at 198 + 5 + 21 = 224.
const MaxBranchNameBytes = 100

// ValidateBranchName applies lance's branch-name rules, and the storage rules every key the
// name becomes part of must pass (tree/<name>/…, _refs/branches/<name>.json), so a name it
// accepts can be stored on every backend. "main" is reserved: it names no created branch.
func ValidateBranchName(name string) error {
	if rule := BranchNameRule(name); rule != "" {
		return &BranchError{Branch: name, Reason: "invalid name: " + rule}
	}
	return nil
}

// BranchNameRule is the first rule name breaks, or "" when it is a valid name for a created
// branch.
func BranchNameRule(name string) string {
	switch {
	case name == "":
		return "empty"
	case name == "main":
		return "main is reserved"
	case len(name) > MaxBranchNameBytes:
		return fmt.Sprintf("longer than %d bytes (%d)", MaxBranchNameBytes, len(name))
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return "starts or ends with /"
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "":
			return "empty path segment (//)"
		case ".", "..":
			return `has a "." or ".." segment`
		}
	}
	switch {
	case strings.Contains(name, "..") || strings.Contains(name, `\`):
		return `contains .. or \`
	case strings.HasSuffix(name, ".lock"):
		return "ends with .lock"
	case strings.Contains(name, "__0x"):
		return `contains "__0x" (the object store's escape marker)`
	}
	for _, r := range name {
		if !(r == '/' || r == '.' || r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Sprintf("character %q (allowed: A-Z a-z 0-9 . - _ and / between segments)", r)
		}
	}
	return ""
}

func refKey(name string) string {
	return refsBranchesDir + strings.ReplaceAll(name, "/", "%2F") + ".json"
}

// BranchRef reads the ref of a branch of the dataset rooted at st.
func ReadBranchRef(ctx context.Context, st storage.Store, name string) (*BranchRef, error) {
	b, ok, err := st.GetIfExists(ctx, refKey(name))
	if err != nil {
		return nil, fmt.Errorf("lance: read branch ref %q: %w", name, err)
	}
	if !ok {
		return nil, &BranchError{Branch: name, Reason: "no such branch"}
	}
	var r BranchRef
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &FormatError{File: st.Location(refKey(name)), Offset: -1, Reason: err.Error()}
	}
	return &r, nil
}

// Identifier returns the identifier of this handle's branch (empty for main).
func (d *Dataset) Identifier(ctx context.Context) (BranchIdentifier, error) {
	if d.branch == "" {
		return BranchIdentifier{}, nil
	}
	r, err := ReadBranchRef(ctx, d.root, d.branch)
	if err != nil {
		return nil, err
	}
	return r.Identifier, nil
}

// CreateBranch forks a new branch from this handle's branch and version: a shallow clone under
// tree/<name>/ whose manifest points back at this branch's files through a base path, then the
// ref file. It returns a handle on the new branch.
func (d *Dataset) CreateBranch(ctx context.Context, name string) (*Dataset, error) {
	if err := ValidateBranchName(name); err != nil {
		return nil, err
	}
	if ok, err := d.root.Exists(ctx, refKey(name)); err != nil {
		return nil, fmt.Errorf("lance: create branch %q: %w", name, err)
	} else if ok {
		return nil, &BranchError{Branch: name, Reason: branchExists}
	}
	parentID, err := d.Identifier(ctx)
	if err != nil {
		return nil, err
	}
	dir := branchDir(d.root, name)
	src := d.manifest
	srcPath := strings.TrimSuffix(d.dir.Location(""), "/")
	var refName *string
	if d.branch != "" {
		b := d.branch
		refName = &b
	}
	m := *src
	m.Fragments = cloneFragments(src.Fragments)
	m.BasePaths = append([]BasePath(nil), src.BasePaths...)
	newID := uint32(0)
	for _, bp := range m.BasePaths {
		if bp.ID >= newID {
			newID = bp.ID + 1
		}
	}
	m.BasePaths = append(m.BasePaths, BasePath{ID: newID, Name: refName, IsDatasetRoot: true, Path: srcPath})
	for i := range m.Fragments {
		f := &m.Fragments[i]
		for j := range f.Files {
			if f.Files[j].BaseID == nil {
				f.Files[j].BaseID = &newID
			}
		}
		if f.Deletion != nil && f.Deletion.BaseID == nil {
			f.Deletion.BaseID = &newID
		}
	}
	// The branch reads its parent's index files where they are, as it reads its data files.
	// (Lance's clone points every index at the new base, also one a grandparent holds; an
	// index already naming a base keeps it here, so a branch of a branch still finds it.)
	m.Indices = cloneIndices(src.Indices)
	for i := range m.Indices {
		if m.Indices[i].BaseID == nil {
			m.Indices[i].BaseID = &newID
		}
	}
	bname := name
	m.Branch = &bname
	m.Timestamp = time.Now().UTC()
	m.WriterLibrary, m.WriterVersion = WriterLibrary, WriterVersion
	m.recomputeFlags(src.StableRowIDs())
	txn := &Transaction{ReadVersion: src.Version, UUID: NewUUID(), Op: Operation{Kind: OpClone, Clone: &CloneOp{
		IsShallow: true, RefName: refName, RefVersion: src.Version, RefPath: srcPath, BranchName: &bname}}}
	txnBytes := encodeTransaction(txn)
	m.TransactionFile = txn.FileName()
	if err := dir.Put(ctx, "_transactions/"+m.TransactionFile, txnBytes); err != nil {
		return nil, fmt.Errorf("lance: create branch %q: %w", name, err)
	}
	body := marshalManifestFile(&m, txnBytes)
	key := manifestKey(d.scheme, m.Version)
	if err := inject("lance.branch.before_clone_manifest"); err != nil {
		return nil, err
	}
	if err := dir.PutIfAbsent(ctx, key, body); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return nil, &BranchError{Branch: name, Reason: "a branch tree without a ref exists at " + dir.URI() + "; delete it first"}
		}
		return nil, fmt.Errorf("lance: create branch %q: %w", name, err)
	}
	if err := inject("lance.branch.before_ref"); err != nil {
		return nil, err
	}
	var uuid [16]byte
	_, _ = rand.Read(uuid[:])
	ref := BranchRef{ParentBranch: refName, ParentVersion: src.Version, CreateAt: time.Now().Unix(), ManifestSize: d.size,
		Metadata: map[string]string{}, Identifier: append(append(BranchIdentifier{}, parentID...), VersionMapping{src.Version, hex.EncodeToString(uuid[:])})}
	rb, err := json.MarshalIndent(ref, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := d.root.PutIfAbsent(ctx, refKey(name), rb); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return nil, &BranchError{Branch: name, Reason: branchExists}
		}
		return nil, fmt.Errorf("lance: create branch %q: write ref: %w", name, err)
	}
	if err := inject("lance.branch.after_ref"); err != nil {
		return nil, err
	}
	return &Dataset{root: d.root, dir: dir, branch: name, scheme: d.scheme, manifest: &m, key: key, size: int64(len(body))}, nil
}

// ListBranches lists the branches of the dataset rooted at st, by name.
func ListBranches(ctx context.Context, st storage.Store) ([]Branch, error) {
	files, _, err := st.ListDir(ctx, refsBranchesDir)
	if err != nil {
		return nil, fmt.Errorf("lance: list branches: %w", err)
	}
	var out []Branch
	for _, f := range files {
		base := f.Key[strings.LastIndexByte(f.Key, '/')+1:]
		if !strings.HasSuffix(base, ".json") {
			continue
		}
		name := strings.ReplaceAll(strings.TrimSuffix(base, ".json"), "%2F", "/")
		r, err := ReadBranchRef(ctx, st, name)
		if err != nil {
			var be *BranchError
			if errors.As(err, &be) {
				continue // deleted between list and read
			}
			return nil, err
		}
		out = append(out, Branch{Name: name, Ref: *r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteBranch removes a branch's ref and then its tree, leaving the trees of any live branch
// nested under it (a/b under a) in place.
func DeleteBranch(ctx context.Context, st storage.Store, name string) error {
	if err := ValidateBranchName(name); err != nil {
		return err
	}
	if _, err := ReadBranchRef(ctx, st, name); err != nil {
		return err
	}
	if err := st.Delete(ctx, refKey(name)); err != nil {
		return fmt.Errorf("lance: delete branch %q: %w", name, err)
	}
	if err := inject("lance.branch.after_ref_delete"); err != nil {
		return err
	}
	return ReclaimBranchTree(ctx, st, name)
}

// ReclaimBranchTree deletes the files under tree/<name>/ that no live branch owns. It is what a
// branch delete finishes with, and what reclaims a tree left without a ref by a crash.
func ReclaimBranchTree(ctx context.Context, st storage.Store, name string) error {
	branches, err := ListBranches(ctx, st)
	if err != nil {
		return err
	}
	var keep []string
	for _, b := range branches {
		if b.Name == name {
			return &BranchError{Branch: name, Reason: "still has a ref; delete the branch instead"}
		}
		if strings.HasPrefix(b.Name, name+"/") {
			keep = append(keep, "tree/"+b.Name+"/")
		}
	}
	prefix := "tree/" + name + "/"
	if len(keep) == 0 {
		return st.DeletePrefix(ctx, prefix)
	}
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, o := range objs {
		owned := false
		for _, k := range keep {
			owned = owned || strings.HasPrefix(o.Key, k)
		}
		if !owned {
			if err := st.Delete(ctx, o.Key); err != nil {
				return err
			}
		}
	}
	return nil
}
