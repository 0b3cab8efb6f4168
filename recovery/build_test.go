package recovery

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

func TestNewLoadSidecarMintsFreshIDs(t *testing.T) {
	before := time.Now().UnixMicro()
	a, err := NewLoadSidecar(branchSpec())
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLoadSidecar(branchSpec())
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMicro()
	seen := map[string]bool{goldenCommit: true}
	for _, s := range []*Sidecar{a, b} {
		for _, id := range []string{s.OperationID, s.ProtocolV3.RollbackGraphCommitID} {
			if !ids.IsULID(id) || seen[id] {
				t.Fatalf("id %q is not a fresh ULID", id)
			}
			seen[id] = true
		}
		at, ok := s.StartedAtMicros()
		if !ok || at < before || at > after || s.StartedAt != strconv.FormatInt(at, 10) {
			t.Fatalf("started_at %q not the decimal µs of now", s.StartedAt)
		}
		if s.SchemaVersion != 9 || s.WriterKind != Load || s.ProtocolV3.EffectPhase != Armed {
			t.Fatalf("envelope %+v", s)
		}
		if s.Tables[0].PostCommitPin != 4 || s.Tables[1].PostCommitPin != 2 {
			t.Fatalf("post_commit_pin %d %d", s.Tables[0].PostCommitPin, s.Tables[1].PostCommitPin)
		}
	}
	if b.OperationID <= a.OperationID {
		t.Fatalf("operation ids not increasing: %s then %s", a.OperationID, b.OperationID)
	}
}

func TestNewLoadSidecarPinPaths(t *testing.T) {
	for root, want := range map[string]string{
		"/data/g1":          "/data/g1/edges/000000000000001a-00000000000000ff",
		"/data/g1/":         "/data/g1/edges/000000000000001a-00000000000000ff",
		"s3://bucket/a/g1":  "s3://bucket/a/g1/edges/000000000000001a-00000000000000ff",
		"mem://graphs/g1//": "mem://graphs/g1/edges/000000000000001a-00000000000000ff",
	} {
		spec := branchSpec()
		spec.Root = root
		s, err := NewLoadSidecar(spec)
		if err != nil {
			t.Fatal(err)
		}
		if s.Tables[1].TablePath != want || s.Tables[0].TablePath != strings.TrimRight(root, "/")+"/nodes/0000000000000001-0000000000000004" {
			t.Fatalf("root %q: paths %q %q", root, s.Tables[0].TablePath, s.Tables[1].TablePath)
		}
		if err := s.Validate(root); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate("/other"); err == nil {
			t.Fatal("validated under a foreign root")
		}
	}
}

func TestNewLoadSidecarRefusals(t *testing.T) {
	cases := map[string]struct {
		edit   func(*LoadSpec)
		reason string
	}{
		"no tables":           {func(s *LoadSpec) { s.Tables = nil }, "at least one table"},
		"bad key":             {func(s *LoadSpec) { s.Tables[0].TableKey = "Person" }, "invalid table key"},
		"empty uuid":          {func(s *LoadSpec) { s.Tables[0].Transaction.UUID = "" }, "no planned transaction uuid"},
		"read version":        {func(s *LoadSpec) { s.Tables[0].Transaction.ReadVersion = 2 }, "reads version 2, pin expects 3"},
		"no successor":        {func(s *LoadSpec) { s.Tables[0].ExpectedVersion = ^uint64(0) }, "no successor"},
		"lineage id":          {func(s *LoadSpec) { s.Lineage.GraphCommitID = "c1" }, "not a canonical ULID"},
		"branch mismatch":     {func(s *LoadSpec) { s.Lineage.Branch = nil }, "branch does not match"},
		"actor mismatch":      {func(s *LoadSpec) { s.ActorID = sp("bob") }, "actor_id does not match"},
		"merged parent":       {func(s *LoadSpec) { s.Lineage.MergedParentCommitID = sp(goldenOp) }, "merged parent"},
		"duplicate identity":  {func(s *LoadSpec) { s.Tables[1].Identity, s.Tables[1].TableKey = idPerson, "node:Other" }, "duplicate table identity"},
		"duplicate uuid":      {func(s *LoadSpec) { s.Tables[1].Transaction.UUID = uuidPerson }, "not one-to-one"},
		"zero identity":       {func(s *LoadSpec) { s.Tables[0].Identity.TableIncarnationID = 0 }, "invalid table identity"},
		"empty schema domain": {func(s *LoadSpec) { s.Authority.SchemaIdentityDomain = "" }, "authority must carry"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			spec := branchSpec()
			c.edit(&spec)
			_, err := NewLoadSidecar(spec)
			wantRefusal(t, err, KindShape, c.reason)
		})
	}
}

func TestConfirmRefusals(t *testing.T) {
	cases := map[string]struct {
		edit   func(ups []publisher.DatasetUpdate, txns map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction)
		reason string
	}{
		"different uuid": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			x[idKnows] = Transaction{ReadVersion: 1, UUID: "rebased"}
			return u, x
		}, `table "edge:Knows" committed transaction {read_version: 1, uuid: "rebased"}, planned {read_version: 1, uuid: "a0b1c2d3`},
		"different read version": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			x[idPerson] = Transaction{ReadVersion: 4, UUID: uuidPerson}
			return u, x
		}, "committed transaction {read_version: 4"},
		"missing transaction": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			delete(x, idKnows)
			return u, x
		}, "key set differs"},
		"foreign transaction": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			delete(x, idKnows)
			x[ids.TableIdentity{StableTableID: 9, TableIncarnationID: 9}] = Transaction{ReadVersion: 1, UUID: uuidKnows}
			return u, x
		}, "no result for \"edge:Knows\""},
		"missing update": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			return u[:1], x
		}, "key set differs"},
		"duplicate update": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			return []publisher.DatasetUpdate{u[0], u[0]}, x
		}, "duplicate update"},
		"rebased version": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			u[1].Version = 5
			return u, x
		}, `table "node:Person" achieved version 5 on branch "feature", planned 4 on branch "feature"`},
		"wrong branch": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			u[0].Branch = nil
			return u, x
		}, "on branch main, planned 2"},
		"wrong alias": {func(u []publisher.DatasetUpdate, x map[ids.TableIdentity]Transaction) ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
			u[0].TableKey = "edge:Other"
			return u, x
		}, "achieved version"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := NewLoadSidecar(branchSpec())
			if err != nil {
				t.Fatal(err)
			}
			before, _ := Marshal(s)
			ups, txns := c.edit(confirmedUpdates())
			_, err = s.Confirm(ups, txns)
			wantRefusal(t, err, KindConfirm, c.reason)
			if after, _ := Marshal(s); string(after) != string(before) {
				t.Fatal("a refused Confirm modified the sidecar")
			}
		})
	}
}

func TestConfirmLeavesReceiverArmed(t *testing.T) {
	s := newArmed(t)
	before, _ := Marshal(s)
	c, err := s.Confirm([]publisher.DatasetUpdate{{Identity: idPerson, TableKey: "node:Person", Version: 4, RowCount: 7,
		Meta: publisher.TableVersionMetadata{ManifestPath: "m"}}}, map[ids.TableIdentity]Transaction{idPerson: {ReadVersion: 3, UUID: uuidPerson}})
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := Marshal(s); string(after) != string(before) {
		t.Fatal("Confirm modified its receiver")
	}
	if c.ProtocolV3.EffectPhase != EffectsConfirmed || *c.Tables[0].ConfirmedVersion != 4 ||
		c.ProtocolV3.IntendedDelta.TableUpdates[0].Confirmed.RowCount != 7 || c.ProtocolV3.Effects[0].ConfirmedTransaction == nil {
		t.Fatalf("not confirmed: %+v", c.ProtocolV3)
	}
	if err := c.Validate(goldenRoot); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Confirm(nil, nil); err == nil || !strings.Contains(err.Error(), "already EffectsConfirmed") {
		t.Fatalf("second Confirm: %v", err)
	}
}

// BranchMerge protocol_v4: the effect kind is an object under "kind", internally tagged by
// "kind" (tag first, then the variant's fields in order, optionals omitted when absent).
func TestProtocolV4RoundTrip(t *testing.T) {
	s := newArmed(t)
	s.WriterKind = BranchMerge
	p3 := s.ProtocolV3
	s.ProtocolV3 = nil
	s.Tables = append(s.Tables, TablePin{Identity: idKnows, TableKey: "edge:Knows",
		TablePath: goldenRoot + "/edges/000000000000001a-00000000000000ff", ExpectedVersion: 1, PostCommitPin: 2, TableBranch: sp("feature")})
	bid := lance.BranchIdentifier{{ParentVersion: 9, UUID: "ffffffffffffffffffffffffffffffff"}}
	s.ProtocolV4 = &ProtocolV4{
		Authority:             p3.Authority,
		Lineage:               Lineage{GraphCommitID: goldenCommit, ActorID: sp("alice"), MergedParentCommitID: sp("01JW0000000000000000000000"), CreatedAt: 5},
		RollbackGraphCommitID: goldenRollback,
		EffectPhase:           Armed,
		Effects: []MergeEffect{
			{Identity: idPerson, TableKey: "node:Person", Kind: MergeEffectKind{Kind: MultiCommitHead,
				PlannedTransactions: []Transaction{{ReadVersion: 3, UUID: "t1"}, {ReadVersion: 4, UUID: "t2"}}}},
			{Identity: idKnows, TableKey: "edge:Knows", Kind: MergeEffectKind{Kind: RefOnlyFork, SourceVersion: 1}},
		},
		IntendedDelta: IntendedDelta{TableUpdates: []TableUpdate{
			{Identity: idPerson, TableKey: "node:Person", ExpectedVersion: 3},
			{Identity: idKnows, TableKey: "edge:Knows", ExpectedVersion: 1, TableBranch: sp("feature")},
			{Identity: ids.TableIdentity{StableTableID: 5, TableIncarnationID: 6}, TableKey: "node:PointerOnly", ExpectedVersion: 2},
		}},
	}
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`
        "kind": {
          "kind": "MultiCommitHead",
          "planned_transactions": [
            {
              "read_version": 3,
              "uuid": "t1"
            },`, `
        "kind": {
          "kind": "RefOnlyFork",
          "source_version": 1
        }`, `"merged_parent_commit_id": "01JW0000000000000000000000",`} {
		if !strings.Contains(string(out), frag) {
			t.Fatalf("missing %s in\n%s", frag, out)
		}
	}
	if strings.Contains(string(out), "protocol_v3") {
		t.Fatal("protocol_v3 written for a merge")
	}
	back, err := Parse(Key(goldenOp), out, goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Marshal(back)
	assertJSON(t, again, string(out))

	// Confirmed forms carry the optional variant fields, in order.
	back.ProtocolV4.EffectPhase = EffectsConfirmed
	k := &back.ProtocolV4.Effects[0].Kind
	k.SourceForkVersion, k.ConfirmedVersion, k.ConfirmedBranchIdentifier = u64p(3), u64p(5), &bid
	back.ProtocolV4.Effects[1].Kind.ConfirmedBranchIdentifier = &bid
	for i, v := range []uint64{5, 1, 2} {
		u := &back.ProtocolV4.IntendedDelta.TableUpdates[i]
		u.Confirmed = &ConfirmedUpdate{TableVersion: v, TableBranch: u.TableBranch, VersionMetadata: publisher.TableVersionMetadata{ManifestPath: "m"}}
	}
	out, err = Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"kind": "MultiCommitHead",
          "source_fork_version": 3,
          "planned_transactions": [`) || !strings.Contains(string(out), `"confirmed_version": 5,
          "confirmed_branch_identifier": {
            "version_mapping": [
              [
                9,
                "ffffffffffffffffffffffffffffffff"
              ]
            ]
          }`) {
		t.Fatalf("confirmed merge layout:\n%s", out)
	}
	final, err := Parse(Key(goldenOp), out, goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	again, _ = Marshal(final)
	assertJSON(t, again, string(out))

	// Envelope rules of §4.3.
	m := generic(t, string(out))
	obj(m, "protocol_v4", "lineage")["merged_parent_commit_id"] = nil
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindShape, "captured source commit")
	m = generic(t, string(out))
	m["merge_source_commit_id"] = goldenCommit
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindShape, "only in protocol_v4")
	m = generic(t, string(out))
	obj(m, "protocol_v4", "effects", 1, "kind")["kind"] = "Other"
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindCorrupt, "unknown variant `Other`")
	m = generic(t, string(out))
	delete(obj(m, "protocol_v4", "effects", 0, "kind"), "planned_transactions")
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindCorrupt, "missing field `planned_transactions`")
}

// Sidecars of writers this package does not interpret (EnsureIndices) are still recognised and
// their payloads survive a rewrite verbatim.
func TestUninterpretedWritersPassThrough(t *testing.T) {
	payload := `{"authority":{"x":1},"effects":[{"kind":"Whatever"}]}`
	m := generic(t, goldenArmed)
	delete(m, "protocol_v3")
	m["writer_kind"] = "EnsureIndices"
	m["actor_id"] = nil
	m["additional_registrations"] = []any{jmap{"table_key": "node:New"}}
	var raw any
	_ = jsonUnmarshalNumber(payload, &raw)
	m["protocol_v8"] = raw
	s, err := Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	if s.WriterKind != EnsureIndices || len(s.AdditionalRegistrations) != 1 {
		t.Fatalf("%+v", s)
	}
	out, _ := Marshal(s)
	back, err := Parse(Key(goldenOp), out, goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Marshal(back)
	assertJSON(t, again, string(out))
	if !strings.Contains(string(out), `"kind": "Whatever"`) {
		t.Fatalf("payload lost:\n%s", out)
	}
	delete(m, "protocol_v8")
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindShape, "missing required protocol_v8")

	m["writer_kind"] = "Optimize"
	delete(m, "additional_registrations")
	if _, err := Parse(Key(goldenOp), mustJSON(t, m), goldenRoot); err != nil {
		t.Fatalf("Optimize: %v", err)
	}
	m["tables"] = []any{}
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindShape, "must not be empty")
}

func TestConfirmMergeLeavesReceiverArmed(t *testing.T) {
	a := armedSpec()
	a.Lineage.MergedParentCommitID = sp("01JW0000000000000000000000")
	stage := "stage"
	s, err := NewMergeSidecar(MergeSpec{Root: goldenRoot, ActorID: a.ActorID, Authority: a.Authority, Lineage: a.Lineage,
		Tables: []MergeTable{
			{Identity: idPerson, TableKey: "node:Person", ExpectedVersion: 3, Kind: MultiCommitHead,
				Chain: []Transaction{{ReadVersion: 3, UUID: uuidPerson}, {ReadVersion: 4, UUID: uuidKnows}}},
			{Identity: idKnows, TableKey: "edge:Knows", ExpectedVersion: 2, TableBranch: &stage, Kind: RefOnlyFork, SourceVersion: 6},
		}})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := Marshal(s)
	c, err := s.ConfirmMerge([]publisher.DatasetUpdate{
		{Identity: idPerson, TableKey: "node:Person", Version: 5, RowCount: 9, Meta: publisher.TableVersionMetadata{ManifestPath: "p"}},
		{Identity: idKnows, TableKey: "edge:Knows", Version: 6, Branch: &stage, RowCount: 2, Meta: publisher.TableVersionMetadata{ManifestPath: "k"}},
	}, map[ids.TableIdentity]lance.BranchIdentifier{idKnows: {{ParentVersion: 6, UUID: "0123456789abcdef0123456789abcdef"}}})
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := Marshal(s); string(after) != string(before) {
		t.Fatal("ConfirmMerge modified its receiver")
	}
	p := c.ProtocolV4
	if p.EffectPhase != EffectsConfirmed || *c.Tables[0].ConfirmedVersion != 5 || *c.Tables[1].ConfirmedVersion != 6 ||
		p.Effects[0].Kind.ConfirmedVersion == nil || p.Effects[1].Kind.ConfirmedBranchIdentifier == nil ||
		p.IntendedDelta.TableUpdates[1].Confirmed.RowCount != 2 {
		t.Fatalf("not confirmed: %+v", p)
	}
	if s.ProtocolV4.EffectPhase != Armed || s.Tables[0].ConfirmedVersion != nil {
		t.Fatal("receiver is no longer Armed")
	}
	if err := c.Validate(goldenRoot); err != nil {
		t.Fatal(err)
	}
}
