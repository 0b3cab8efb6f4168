package lance

import (
	"context"
	"strings"
	"testing"
)

// In refuses values of the other kind than its column's instead of matching no row: a delete
// of "5" from an Int64 column would otherwise commit and remove nothing.
func TestInRefusesValuesOfTheOtherKind(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{In("id", "5"), `column "id" is int64, given string values`},
		{In("name", 5), `column "name" is utf8, given integer values`},
		{In("id", 5, "5"), `given string values`},
	} {
		if _, err := d.StageDelete(ctx, c.f, StageOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.f.SQL, err, c.want)
		}
	}
	s, err := d.StageDelete(ctx, In("id", 5), StageOptions{})
	d = commit(t, d, s, err)
	if n := d.CountRows(); n != 9 {
		t.Fatalf("after deleting id 5: %d rows, want 9", n)
	}
}
