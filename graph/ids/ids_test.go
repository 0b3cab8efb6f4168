package ids

import "testing"

func TestFormats(t *testing.T) {
	id := TableIdentity{StableTableID: 1, TableIncarnationID: 0x2a}
	if got := TablePath("node:Person", id); got != "nodes/0000000000000001-000000000000002a" {
		t.Fatal(got)
	}
	if got := TablePath("edge:Knows", id); got != "edges/0000000000000001-000000000000002a" {
		t.Fatal(got)
	}
	if got := TableObjectID(id); got != "table:0000000000000001:000000000000002a" {
		t.Fatal(got)
	}
	if got := TableVersionObjectID(id, 3); got != "table_version:0000000000000001:000000000000002a:00000000000000000003" {
		t.Fatal(got)
	}
	if got := TombstoneObjectID(id, 3); got != "table_tombstone:0000000000000001:000000000000002a:00000000000000000003" {
		t.Fatal(got)
	}
	if GraphHeadObjectID("") != "graph_head:main" || GraphHeadObjectID("main") != "graph_head:main" || GraphHeadObjectID("a/b") != "graph_head:a/b" {
		t.Fatal("head ids")
	}
	if (TableIdentity{1, 0}).Valid() || !id.Valid() {
		t.Fatal("validity")
	}
	if BranchPtr("main") != nil || *BranchPtr("x") != "x" {
		t.Fatal("branch ptr")
	}
}

func TestULID(t *testing.T) {
	a, b := NewULID(), NewULID()
	if !IsULID(a) || !IsULID(b) || !(a < b) {
		t.Fatalf("%s %s", a, b)
	}
	if IsULID("01jz0000000000000000000000") || IsULID("short") {
		t.Fatal("bad ULID accepted")
	}
}
