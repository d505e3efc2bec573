package ids

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFormatAndSeq(t *testing.T) {
	at := time.Date(2026, 12, 1, 21, 54, 8, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		k    Kind
		seq  int
		want string
	}{
		{Driver, 0, "driver-20261201205408-0000"},
		{Driver, 12345, "driver-20261201205408-12345"},
		{App, 7, "app-20261201205408-0007"},
		{App, MaxSeq, "app-20261201205408-999999999"},
	} {
		id := Format(c.k, at, c.seq)
		if id != c.want {
			t.Errorf("Format(%s, %d) = %s, want %s", c.k, c.seq, id, c.want)
		}
		if seq, err := Seq(c.k, id); err != nil || seq != c.seq {
			t.Errorf("Seq(%s, %s) = %d, %v, want %d", c.k, id, seq, err, c.seq)
		}
	}
}

// Every malformed form is refused, the loose ones the old copies let
// through among them.
func TestSeqRefuses(t *testing.T) {
	for _, c := range []struct {
		k  Kind
		id string
	}{
		{Driver, ""}, {Driver, "driver-20261201205408-+5"}, {Driver, "driver-20261201205408--5"},
		{Driver, "driver-2026120120540-0001"}, {Driver, "driver-20261201205408-1234567890"},
		{Driver, "app-20261201205408-0001"}, {App, "driver-20261201205408-0001"},
		{Driver, "driver-20261201205408-0001/../x"}, {Driver, "driver-20261201205408-0001\n"},
		{App, "app-2026120120540x-0001"}, {App, "app-20261201205408-"},
	} {
		if _, err := Seq(c.k, c.id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Seq(%s, %q) = %v, want ErrInvalid", c.k, c.id, err)
		}
	}
	if err := CheckDriver("driver-20261201205408-0001"); err != nil {
		t.Errorf("CheckDriver: %v", err)
	}
	if err := CheckApp("driver-20261201205408-0001"); err == nil {
		t.Error("CheckApp accepted a driver ID")
	}
}

func TestNames(t *testing.T) {
	for _, ok := range []string{"w1", "worker-1.rack_2", "M", "a234567890123456789012345678901234567890123456789012345678901234"} {
		if err := CheckWorker(ok); err != nil {
			t.Errorf("CheckWorker(%q): %v", ok, err)
		}
		if err := CheckMaster(ok); err != nil {
			t.Errorf("CheckMaster(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-w", ".w", "w/1", "w 1", "../w", "wé", "a2345678901234567890123456789012345678901234567890123456789012345"} {
		if err := CheckWorker(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckWorker(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// A refused ID is quoted whole up to maxQuoted bytes, and past them cut
// there and followed by its length, so a megabyte ID makes a short error.
func TestRefusalsQuoteAShortID(t *testing.T) {
	const bound = 64 // maxQuoted
	atBound := "-" + strings.Repeat("w", bound-1)
	past := atBound + "w"
	huge := strings.Repeat("w", 1<<20)
	for _, c := range []struct {
		err  error
		want string
	}{
		{CheckWorker(atBound), `worker ID "` + atBound + `" must match`},
		{CheckWorker(past), `worker ID "` + atBound + `"... (65 bytes) must match`},
		{CheckMaster(huge), `master ID "` + huge[:bound] + `"... (1048576 bytes) must match`},
		{CheckDriver(huge), `"` + huge[:bound] + `"... (1048576 bytes) is not a driver ID`},
	} {
		if !errors.Is(c.err, ErrInvalid) || !strings.Contains(c.err.Error(), c.want) || len(c.err.Error()) > 200 {
			t.Errorf("refusal %.300q, want ErrInvalid containing %q in at most 200 bytes", c.err, c.want)
		}
	}
}

// A Maker gives each sequence number once, from many goroutines, and
// Raise never moves a sequence back.
func TestMakerUnique(t *testing.T) {
	g := NewMaker(5, 9)
	at := time.Unix(0, 0)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				d, a := g.Driver(at), g.App(at)
				mu.Lock()
				if seen[d] || seen[a] {
					t.Errorf("ID given twice: %s or %s", d, a)
				}
				seen[d], seen[a] = true, true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if d, a := g.Next(); d != 805 || a != 809 {
		t.Fatalf("Next() = %d, %d, want 805, 809", d, a)
	}
	g.Raise(10, 2000)
	if d, a := g.Next(); d != 805 || a != 2000 {
		t.Fatalf("after Raise(10, 2000): Next() = %d, %d, want 805, 2000", d, a)
	}
}
