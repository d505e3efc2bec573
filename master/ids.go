package master

import (
	"fmt"
	"sync"
	"time"
)

// idMaker makes IDs of Spark's forms driver-<yyyyMMddHHmmss>-<seq> and
// app-<yyyyMMddHHmmss>-<seq> (Master.newDriverId and newApplicationId: the
// time in UTC and a sequence number, four digits at least). Each sequence
// continues from the tables' counter each time this master becomes leader,
// so IDs stay unique across leaders.
type idMaker struct {
	mu                sync.Mutex
	driverSeq, appSeq int
}

func newIDMaker() *idMaker { return &idMaker{} }

func (g *idMaker) reset(nextDriver, nextApp int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.driverSeq, g.appSeq = nextDriver, nextApp
}

func (g *idMaker) driverID(t time.Time) string { return g.next("driver", &g.driverSeq, t) }

func (g *idMaker) appID(t time.Time) string { return g.next("app", &g.appSeq, t) }

func (g *idMaker) next(kind string, seq *int, t time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("%s-%s-%04d", kind, t.UTC().Format("20060102150405"), *seq)
	*seq++
	return id
}
