package service

// Local is every rule as this master answers it itself, at the end of the
// Chain: Core (drivers, workers, this master's views, the path to Raft),
// Applications, Operator and Uploads over that one Core. Each rule an
// Endpoint serves is declared by exactly one of the four; Local declares
// none. Make one with New.
type Local struct {
	*Core
	*Applications
	*Operator
	*Uploads
	*Scheduling
}

// New returns a Local that is not leading; Lead starts and ends its terms.
func New(cfg Config, d Deps) *Local {
	c := &Core{cfg: cfg, Deps: d}
	c.reports.apply = c.Apply
	return &Local{Core: c, Applications: &Applications{Core: c}, Operator: &Operator{Core: c}, Uploads: &Uploads{Core: c}, Scheduling: &Scheduling{Core: c}}
}
