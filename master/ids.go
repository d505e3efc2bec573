package master

import (
	"fmt"
	"sync"
	"time"
)

// idMaker makes driver IDs of Spark's form driver-<yyyyMMddHHmmss>-<seq>
// (Master.newDriverId: the submission time in UTC and a sequence number,
// four digits at least). The sequence continues from the tables' counter
// each time this master becomes leader, so IDs stay unique across leaders.
type idMaker struct {
	mu  sync.Mutex
	seq int
}

func newIDMaker() *idMaker { return &idMaker{} }

func (g *idMaker) reset(next int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq = next
}

func (g *idMaker) driverID(t time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("driver-%s-%04d", t.UTC().Format("20060102150405"), g.seq)
	g.seq++
	return id
}
