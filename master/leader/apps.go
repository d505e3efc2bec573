package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-project/drover/model"
)

// appWatchInterval is how often the leader looks for apps whose client
// went quiet.
const appWatchInterval = time.Second

// watchApps ends apps whose client stopped watching for AppTimeout, while
// this master leads. Like a worker's, an app's clock starts no earlier than
// the moment this master took over, so a failover ends no app.
func (t *Term) watchApps(ctx context.Context) {
	tick := time.NewTicker(appWatchInterval)
	defer tick.Stop()
	for {
		apps, _ := t.d.FSM.State().LiveApps()
		at := time.Now()
		for _, a := range apps {
			if a.State.Terminal() {
				continue
			}
			heard := t.Since
			for _, h := range []time.Time{time.UnixMilli(a.SubmittedAt), t.Apps.Get(a.ID)} {
				if h.After(heard) {
					heard = h
				}
			}
			if at.Sub(heard) < t.cfg.AppTimeout {
				continue
			}
			reason := fmt.Sprintf("application client not heard from for %s", t.cfg.AppTimeout)
			t.d.Log.Warn("app client lost", "app", a.ID, "silent_for", at.Sub(heard).Round(time.Millisecond))
			if _, err := t.d.Apply(&model.EndApp{AppID: a.ID, State: model.AppFailed, Reason: reason, Time: now()}); err != nil {
				t.d.Log.Warn("app end not committed", "app", a.ID, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
