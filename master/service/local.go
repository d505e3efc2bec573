package service

// Local is the whole Service as this master answers it itself, behind the
// Forwarder: Core (drivers, workers, this master's views, the path to Raft),
// Applications and Operator over that one Core. Every method of Service is
// declared by exactly one of the three; Local declares none. Make one with
// New.
type Local struct {
	*Core
	*Applications
	*Operator
}

// New returns a Local that is not leading; Lead starts and ends its terms.
func New(cfg Config, d Deps) *Local {
	c := &Core{cfg: cfg, Deps: d}
	c.reports.apply = c.Apply
	return &Local{Core: c, Applications: &Applications{Core: c}, Operator: &Operator{Core: c}}
}
