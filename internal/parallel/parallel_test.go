package parallel

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestEachReportsTheFirstErrorInOrder(t *testing.T) {
	items := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for _, limit := range []int{1, 3, 8} {
		var ran atomic.Int32
		err := Each(items, limit, func(i int) error {
			ran.Add(1)
			if i == 2 || i == 6 {
				time.Sleep(time.Duration(8-i) * time.Millisecond) // the later failure finishes first
				return fmt.Errorf("item %d", i)
			}
			return nil
		})
		if err == nil || err.Error() != "item 2" {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if limit > 1 && ran.Load() != int32(len(items)) {
			t.Fatalf("limit %d: ran %d of %d", limit, ran.Load(), len(items))
		}
	}
}

func TestEachBoundsConcurrency(t *testing.T) {
	var cur, peak atomic.Int32
	err := Each(make([]int, 20), 3, func(int) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		cur.Add(-1)
		return nil
	})
	if err != nil || peak.Load() > 3 {
		t.Fatalf("peak %d, err %v", peak.Load(), err)
	}
	if Each([]int{}, 4, func(int) error { return errors.New("never") }) != nil {
		t.Fatal("no items, yet an error")
	}
}
