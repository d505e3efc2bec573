package service

import (
	"errors"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// refusal applies cmd as the first entry of new tables and
// returns the tables' refusal, failing the test if they took it or
// changed.
func refusal(t *testing.T, cmd model.Command) error {
	t.Helper()
	f := fsm.New()
	before, err := f.State().StateHash()
	if err != nil {
		t.Fatal(err)
	}
	data, err := fsm.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := f.ApplyCommand(1, data).(error)
	if res == nil {
		t.Fatalf("the tables took %+v", cmd)
	}
	if after, _ := f.State().StateHash(); after != before {
		t.Errorf("refusing %+v changed the tables", cmd)
	}
	return res
}

// A program spec is checked by one Validate on both sides of Raft: what a
// master refuses as "invalid request: X" the tables refuse as "invalid
// command: X", the same line, and a refused entry changes nothing. A
// registration whose artifacts the tables refuse says "invalid command"
// once.
func TestSpecRefusedAlikeBeforeAndAfterRaft(t *testing.T) {
	jar, err := model.NormalizeArtifact(model.Artifact{Source: "https://example.com/a.jar"})
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"/bin/true"}
	for _, tc := range []struct {
		name string
		spec model.DriverSpec
		want string
	}{
		{"empty program", model.DriverSpec{Cores: 1, MemoryMB: 1}, "the program is empty"},
		{"no cores", model.DriverSpec{Argv: argv, MemoryMB: 1}, "cores must be positive, got 0"},
		{"reserved variable", model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 1, Env: map[string]string{"DROVER_RUN": "1"}},
			"environment name DROVER_RUN is set by Drover itself"},
		{"two artifacts on one path", model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{jar, jar}},
			"invalid artifact: https://example.com/a.jar and https://example.com/a.jar both stage a.jar"},
		{"resource amount", model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 1, Resources: model.ResourceAmounts{"gpu": 0}},
			"driver resources: resource gpu: amount 0 is not from 1 to 1024"},
		{"restart bound unsupervised", model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 1, MaxRestarts: 1},
			"max restarts and reschedule after need supervise"},
		{"user", model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 1, User: "0"}, `user "0" is a numeric uid: give a user name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := api.SubmitRequest{Token: "t", DriverSpec: tc.spec}
			if len(tc.spec.Artifacts) > 0 {
				req.Artifacts = []model.Artifact{{Source: jar.Source}, {Source: jar.Source}}
			}
			_, err := submission(req)
			if !errors.Is(err, api.ErrInvalidRequest) || err.Error() != "invalid request: "+tc.want {
				t.Errorf("master: %v, want invalid request: %s", err, tc.want)
			}
			err = refusal(t, &model.SubmitDriver{ID: "driver-20261129120000-0000", Token: "t", DriverSpec: tc.spec})
			if !errors.Is(err, model.ErrInvalidCommand) || err.Error() != "invalid command: "+tc.want {
				t.Errorf("tables: %v, want invalid command: %s", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		change func(*model.RegisterApp)
		want   string
	}{
		{"core cap", func(c *model.RegisterApp) { c.MaxCores, c.CoresPerExecutor = 1, 2 }, "max cores 1 is less than the 2 cores of one executor"},
		{"executor retries", func(c *model.RegisterApp) { c.MaxExecutorRetries = -2 }, "max executor retries must be -1 (never fail) or more, got -2"},
		{"resource amount", func(c *model.RegisterApp) { c.ResourcesPerExecutor = model.ResourceAmounts{"gpu": 0} },
			"executor resources: resource gpu: amount 0 is not from 1 to 1024"},
		{"artifact", func(c *model.RegisterApp) { c.Artifacts = []model.Artifact{{Name: "a.jar"}} },
			"artifact upload: (a.jar) needs exactly one of a URL and an upload"},
		{"driver run", func(c *model.RegisterApp) { c.DriverRun = 1 }, "a driver attempt or run needs a driver ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &model.RegisterApp{ID: "app-20261129120000-0000", Token: "t", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: argv}
			tc.change(cmd)
			if err := invalidRequest(cmd.Validate()); err == nil || err.Error() != "invalid request: "+tc.want {
				t.Errorf("master: %v, want invalid request: %s", err, tc.want)
			}
			err := refusal(t, cmd)
			if !errors.Is(err, model.ErrInvalidCommand) || err.Error() != "invalid command: "+tc.want {
				t.Errorf("tables: %v, want invalid command: %s", err, tc.want)
			}
		})
	}
}
