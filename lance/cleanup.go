package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// Version cleanup: a dataset keeps every version it ever committed, and every data, deletion
// and index file those versions name, until something removes them. A cleanup removes, branch
// by branch, the versions below a horizon the caller chose (never a branch's newest version,
// nor the first version of a non-main branch, the fork a branch's lineage is read from), and
// then the files that only removed versions named (an index's directory goes whole, once no
// kept version lists the index). Asked to, it also removes the data, deletion and index files
// no version names at all, the staged files of writes that never committed and
// files a deleted branch kept alive after the versions that made them were removed, when they
// are older than a grace the caller gives: an unnamed file may belong to a write under way, and
// only its age tells it from garbage.

// CleanupPlan is what one cleanup of a dataset would remove.
type CleanupPlan struct {
	root     storage.Store
	versions []cleanupVersion // oldest first per branch
	files    []cleanupFile
	bytes    uint64
}

type cleanupVersion struct {
	branch string
	dir    storage.Store
	key    string // the manifest
	txn    string // its _transactions/ file, "" for an inline-only version
}

type cleanupFile struct {
	st   storage.Store
	key  string
	size uint64
}

// VersionsRemoved is how many versions the plan removes.
func (p *CleanupPlan) VersionsRemoved() int { return len(p.versions) }

// FilesRemoved is how many data, deletion and index files the plan removes.
func (p *CleanupPlan) FilesRemoved() int { return len(p.files) }

// BytesRemoved is the size of the data and index files the plan removes (deletion files named
// by a removed version, whose size no manifest records, are not counted).
func (p *CleanupPlan) BytesRemoved() uint64 { return p.bytes }

// PlanCleanup plans the cleanup of the dataset rooted at st: on each branch named in horizons
// ("" is main), the versions below its horizon go; branches not named keep every version.
// Every version of every branch is read (the kept ones say which files stay), so the cost
// follows the history, as the cleanup's own work does. A non-zero orphansBefore adds the files
// no version names that were written before it (a write under way is younger than that).
func PlanCleanup(ctx context.Context, st storage.Store, horizons map[string]uint64, orphansBefore time.Time) (*CleanupPlan, error) {
	branches := []string{""}
	bs, err := ListBranches(ctx, st)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		branches = append(branches, b.Name)
	}
	p := &CleanupPlan{root: st}
	kept := map[string]bool{}        // locations of files a kept version names
	gone := map[string]cleanupFile{} // files a removed version names, by location
	// Index directories (_indices/<uuid>/), by location, likewise: an index's files are removed
	// only when no kept version names the index.
	keptIdx := map[string]bool{}
	goneIdx := map[string]cleanupFile{} // key: the directory
	for _, branch := range branches {
		head, err := Open(ctx, st, WithBranch(branch))
		if err != nil {
			var be *BranchError
			if errors.As(err, &be) {
				continue // deleted meanwhile
			}
			return nil, err
		}
		versions, err := head.Versions(ctx)
		if err != nil {
			return nil, err
		}
		horizon, cut := horizons[branch]
		for i, v := range versions {
			d, err := head.Checkout(ctx, v)
			if err != nil {
				return nil, err
			}
			remove := cut && v < horizon && v != head.Version() && (branch == "" || i > 0)
			err = d.eachFile(func(f cleanupFile) {
				loc := f.st.Location(f.key)
				if remove {
					gone[loc] = f
				} else {
					kept[loc] = true
				}
			})
			if err != nil {
				return nil, err
			}
			err = d.eachIndexDir(func(f cleanupFile) {
				loc := f.st.Location(f.key)
				if remove {
					goneIdx[loc] = f
				} else {
					keptIdx[loc] = true
				}
			})
			if err != nil {
				return nil, err
			}
			if remove {
				cv := cleanupVersion{branch: branch, dir: d.dir, key: d.key}
				if t := d.manifest.TransactionFile; t != "" {
					cv.txn = "_transactions/" + t
				}
				p.versions = append(p.versions, cv)
			}
		}
	}
	if !orphansBefore.IsZero() {
		for _, branch := range branches {
			dir := st
			if branch != "" {
				dir = st.Sub("tree/" + branch)
			}
			for _, prefix := range []string{"data/", "_deletions/"} {
				objs, err := dir.List(ctx, prefix)
				if err != nil {
					return nil, err
				}
				for _, o := range objs {
					if o.ModTime.IsZero() || !o.ModTime.Before(orphansBefore) {
						continue // too young to judge, or of unknown age
					}
					if loc := dir.Location(o.Key); !kept[loc] {
						if _, named := gone[loc]; !named {
							gone[loc] = cleanupFile{st: dir, key: o.Key, size: uint64(o.Size)}
						}
					}
				}
			}
		}
	}
	if !orphansBefore.IsZero() {
		// Index directories no version names, every file of them older than the grace (an
		// index build under way writes its files before the manifest that names them).
		for _, branch := range branches {
			dir := st
			if branch != "" {
				dir = st.Sub("tree/" + branch)
			}
			objs, err := dir.List(ctx, "_indices/")
			if err != nil {
				return nil, err
			}
			young := map[string]bool{}
			for _, o := range objs {
				if d, ok := indexDirOf(o.Key); ok && (o.ModTime.IsZero() || !o.ModTime.Before(orphansBefore)) {
					young[d] = true
				}
			}
			for _, o := range objs {
				d, ok := indexDirOf(o.Key)
				if !ok || young[d] {
					continue
				}
				if loc := dir.Location(d); !keptIdx[loc] {
					if _, named := goneIdx[loc]; !named {
						gone[dir.Location(o.Key)] = cleanupFile{st: dir, key: o.Key, size: uint64(o.Size)}
					}
				}
			}
		}
	}
	for loc, ix := range goneIdx {
		if keptIdx[loc] {
			continue
		}
		objs, err := ix.st.List(ctx, ix.key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			gone[ix.st.Location(o.Key)] = cleanupFile{st: ix.st, key: o.Key, size: uint64(o.Size)}
		}
	}
	locs := make([]string, 0, len(gone))
	for loc := range gone {
		if !kept[loc] {
			locs = append(locs, loc)
		}
	}
	sort.Strings(locs)
	for _, loc := range locs {
		p.files = append(p.files, gone[loc])
		p.bytes += gone[loc].size
	}
	return p, nil
}

// eachFile calls fn with every data and deletion file this version names.
func (d *Dataset) eachFile(fn func(cleanupFile)) error {
	for i := range d.manifest.Fragments {
		f := &d.manifest.Fragments[i]
		for j := range f.Files {
			st, key, err := d.dataFileKey(&f.Files[j])
			if err != nil {
				return err
			}
			fn(cleanupFile{st: st, key: key, size: f.Files[j].FileSizeBytes})
		}
		if f.Deletion != nil {
			st, _, err := d.resolveBase(f.Deletion.BaseID)
			if err != nil {
				return err
			}
			fn(cleanupFile{st: st, key: deletionKey(f.ID, f.Deletion)})
		}
	}
	return nil
}

// eachIndexDir calls fn with the directory (key ending in "/") of every index this version
// lists.
func (d *Dataset) eachIndexDir(fn func(cleanupFile)) error {
	for i := range d.manifest.Indices {
		x := &d.manifest.Indices[i]
		st, _, err := d.resolveBase(x.BaseID)
		if err != nil {
			return err
		}
		fn(cleanupFile{st: st, key: x.Dir()})
	}
	return nil
}

// indexDirOf is the index directory ("_indices/<uuid>/") a key under _indices/ lies in.
func indexDirOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "_indices/")
	if !ok {
		return "", false
	}
	uuid, _, ok := strings.Cut(rest, "/")
	if !ok || uuid == "" {
		return "", false
	}
	return "_indices/" + uuid + "/", true
}

// Apply removes what the plan names: first the files no kept version names, then the
// removed versions' transaction files, then their manifests, oldest first. Kept versions never
// lose a file. A crash part way leaves removed versions still listed whose files may be gone
// (they were below the horizon: nothing the graph reads); planning again finds them and
// finishes, which it could not if their manifests went first and left their files unnamed.
func (p *CleanupPlan) Apply(ctx context.Context) error {
	for _, f := range p.files {
		if err := f.st.Delete(ctx, f.key); err != nil {
			return fmt.Errorf("lance: cleanup: remove %s: %w", f.st.Location(f.key), err)
		}
	}
	if err := inject("lance.cleanup.after_files"); err != nil {
		return err
	}
	for _, v := range p.versions {
		if v.txn == "" {
			continue
		}
		if err := v.dir.Delete(ctx, v.txn); err != nil {
			return fmt.Errorf("lance: cleanup: remove %s: %w", v.dir.Location(v.txn), err)
		}
	}
	for _, v := range p.versions {
		if err := v.dir.Delete(ctx, v.key); err != nil {
			return fmt.Errorf("lance: cleanup: remove version %s: %w", v.dir.Location(v.key), err)
		}
	}
	return nil
}
