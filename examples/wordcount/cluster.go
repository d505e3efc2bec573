package main

import "context"

// cluster is what the driver needs from a cluster manager: start one
// application's executors, learn when they end, and end it. drover.go
// implements it with Drover's client; the tests implement it with
// goroutines and with subprocesses.
type cluster interface {
	// launch registers the application; its executors run spec.Argv
	// with spec.Env added to their environment.
	launch(ctx context.Context, spec appSpec) error
	// events reports executors' changes. It may be closed when the
	// application ends.
	events() <-chan execEvent
	// done is closed when the application reached a final state,
	// whoever ended it; why then says what happened.
	done() <-chan struct{}
	why() string
	// finish ends the application: FINISHED when err is nil, FAILED with
	// err's text otherwise.
	finish(ctx context.Context, err error) error
	// close stops watching the application; it does not end it.
	close()
}

// appSpec is the application the driver asks for.
type appSpec struct {
	Name      string
	Executors int
	Cores     int
	MemoryMB  int64
	Argv      []string
	Env       map[string]string
	// DriverArtifacts: the executors get the driver's artifacts, where
	// Argv[0] is one.
	DriverArtifacts bool
}

// execEvent is a change of one executor. Ended is true once the executor
// process is gone (exited, failed, killed or lost with its worker): its
// shards must be run elsewhere.
type execEvent struct {
	Executor int
	Ended    bool
	State    string
	Message  string
}
