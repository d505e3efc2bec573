// Package ids makes, parses and validates the identifiers of Drover's
// tables and nodes: driver and application IDs in Spark's forms
// (Master.newDriverId and newApplicationId: driver-<yyyyMMddHHmmss>-<seq>
// and app-<yyyyMMddHHmmss>-<seq>, the leader's UTC time and a sequence
// number of four digits at least), and the names of workers and masters.
// It is the only place that knows these forms.
package ids

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxSeq bounds the sequence number of a driver or app ID: nine digits, so
// that the next sequence number never overflows and an ID stays short.
const MaxSeq = 999_999_999

// timeLayout is the yyyyMMddHHmmss part of Spark's IDs.
const timeLayout = "20060102150405"

// Kind is what an ID names.
type Kind string

// The kinds of sequence-numbered IDs.
const (
	// Driver IDs: driver-<yyyyMMddHHmmss>-<seq>.
	Driver Kind = "driver"
	// App IDs: app-<yyyyMMddHHmmss>-<seq>.
	App Kind = "app"
)

// ErrInvalid wraps every refusal of an ID.
var ErrInvalid = errors.New("invalid ID")

var (
	driverPattern = regexp.MustCompile(`^driver-[0-9]{14}-[0-9]{1,9}$`)
	appPattern    = regexp.MustCompile(`^app-[0-9]{14}-[0-9]{1,9}$`)
	// namePattern bounds worker and master names to what is safe in
	// paths, URLs, logs, gossip metadata and Raft server IDs.
	namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Format returns the ID of kind made at t with sequence number seq.
func Format(k Kind, t time.Time, seq int) string {
	return fmt.Sprintf("%s-%s-%04d", k, t.UTC().Format(timeLayout), seq)
}

// Seq returns the sequence number of an ID of kind k. An ID of another
// form is an error wrapping ErrInvalid that quotes the ID (its first
// maxQuoted bytes) and names the form.
func Seq(k Kind, id string) (int, error) {
	p := driverPattern
	if k == App {
		p = appPattern
	}
	if !p.MatchString(id) {
		return 0, fmt.Errorf("%w: %s is not %s ID (%s-<yyyyMMddHHmmss>-<seq>)", ErrInvalid, quote(id), article(k), k)
	}
	seq, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return seq, nil
}

func article(k Kind) string {
	if k == App {
		return "an app"
	}
	return "a driver"
}

// CheckDriver checks that id is a driver ID; the error wraps ErrInvalid.
func CheckDriver(id string) error { _, err := Seq(Driver, id); return err }

// CheckApp checks that id is an app ID; the error wraps ErrInvalid.
func CheckApp(id string) error { _, err := Seq(App, id); return err }

// CheckWorker checks a worker ID: 1 to 64 characters of letters, digits,
// '.', '_' and '-', starting with a letter or digit. The error wraps
// ErrInvalid.
func CheckWorker(id string) error { return checkName("worker", id) }

// CheckMaster checks a master ID (its Raft server ID) as CheckWorker
// checks a worker's.
func CheckMaster(id string) error { return checkName("master", id) }

func checkName(what, id string) error {
	if !namePattern.MatchString(id) {
		return fmt.Errorf("%w: %s ID %s must match %s", ErrInvalid, what, quote(id), namePattern)
	}
	return nil
}

// maxQuoted bounds the bytes of a refused ID that its error quotes: an ID
// comes from a path or a body of up to a MiB, and the refusal goes back
// to the caller and at times to a log.
const maxQuoted = 64

// quote is id quoted, cut to maxQuoted bytes and followed by its length
// when longer.
func quote(id string) string {
	if len(id) <= maxQuoted {
		return strconv.Quote(id)
	}
	return fmt.Sprintf("%q... (%d bytes)", id[:maxQuoted], len(id))
}

// Maker makes driver and app IDs for one term of leadership. Each sequence
// starts from the tables' next free number when the term begins and only
// rises, so IDs stay unique across leaders. It is safe for concurrent use.
type Maker struct {
	mu                sync.Mutex
	driverSeq, appSeq int
}

// NewMaker returns a Maker whose next driver and app sequence numbers are
// nextDriver and nextApp.
func NewMaker(nextDriver, nextApp int) *Maker {
	return &Maker{driverSeq: nextDriver, appSeq: nextApp}
}

// Driver returns a new driver ID made at t.
func (g *Maker) Driver(t time.Time) string { return g.next(Driver, &g.driverSeq, t) }

// App returns a new app ID made at t.
func (g *Maker) App(t time.Time) string { return g.next(App, &g.appSeq, t) }

// Next returns the next driver and app sequence numbers the Maker would
// give.
func (g *Maker) Next() (driver, app int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.driverSeq, g.appSeq
}

// Raise moves the sequences up to nextDriver and nextApp when they are
// behind; it never moves one down.
func (g *Maker) Raise(nextDriver, nextApp int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.driverSeq, g.appSeq = max(g.driverSeq, nextDriver), max(g.appSeq, nextApp)
}

func (g *Maker) next(k Kind, seq *int, t time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := Format(k, t, *seq)
	*seq++
	return id
}
