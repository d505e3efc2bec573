package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/model"
)

// The command line beats the environment, which beats the config file,
// which beats the default; every flag takes part.
func TestFlagsFromEnvironmentAndConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "drover.json")
	if err := os.WriteFile(file, []byte(`{"raft-port": 7201, "http-port": 7202, "bind": "10.0.0.1", "join": ["a:1", "b:2"], "open-reads": true, "timeout": "3s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_HTTP_PORT", "7302")
	t.Setenv("DROVER_BIND", "10.0.0.3")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	raftPort := fs.Int("raft-port", 7101, "")
	httpPort := fs.Int("http-port", 7102, "")
	gossipPort := fs.Int("gossip-port", 7103, "")
	bind := fs.String("bind", "127.0.0.1", "")
	join := fs.StringSlice("join", nil, "")
	open := fs.Bool("open-reads", false, "")
	timeout := fs.Duration("timeout", time.Second, "")
	config := addConfigFlag(fs)
	if err := parseConfigured(fs, config, []string{"--config", file, "--bind", "10.0.0.9"}); err != nil {
		t.Fatal(err)
	}
	if *raftPort != 7201 || *httpPort != 7302 || *gossipPort != 7103 || *bind != "10.0.0.9" ||
		strings.Join(*join, ",") != "a:1,b:2" || !*open || *timeout != 3*time.Second {
		t.Fatalf("got raft %d http %d gossip %d bind %s join %v open %v timeout %s",
			*raftPort, *httpPort, *gossipPort, *bind, *join, *open, *timeout)
	}
	if u := fs.Lookup("raft-port").Usage; !strings.Contains(u, "$DROVER_RAFT_PORT") {
		t.Fatalf("--help does not name the variable: %q", u)
	}
}

// A config file with an unknown key or a bad value, and a variable with a
// bad value, are errors that name what is wrong; nothing is half applied
// silently.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		file, env, want string
	}{
		"unknown key":    {`{"raft-prot": 1}`, "", `unknown key "raft-prot"`},
		"bad value":      {`{"raft-port": "x"}`, "", `"raft-port"`},
		"nested object":  {`{"raft-port": {"a": 1}}`, "", `"raft-port"`},
		"not JSON":       {`raft-port = 1`, "", "config"},
		"trailing data":  {`{"raft-port": 1} {}`, "", "trailing"},
		"bad variable":   {`{}`, "x", "$DROVER_RAFT_PORT"},
		"config in file": {`{"config": "other.json"}`, "", `unknown key "config"`},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.env != "" {
				t.Setenv("DROVER_RAFT_PORT", tc.env)
			}
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.Int("raft-port", 7101, "")
			err := parseConfigured(fs, addConfigFlag(fs), []string{"--config", file})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// progressLine names the attempt, worker, restarts in place and exit code,
// the pieces submit --wait shows as a driver moves.
func TestProgressLine(t *testing.T) {
	one := 1
	d := &model.Driver{ID: "driver-20260101000000-7", State: model.DriverRunning, Attempt: 2, WorkerID: "w3",
		Attempts: []model.Attempt{{Attempt: 1}, {Attempt: 2, Runs: 3}}}
	if got, want := progressLine(d), "driver-20260101000000-7 RUNNING attempt 2 on w3 (run 3)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	d.State, d.ExitCode, d.Message = model.DriverFailed, &one, "exited 1"
	if got, want := progressLine(d), "driver-20260101000000-7 FAILED attempt 2 on w3 (run 3), exit 1: exited 1"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// An attempt not placed yet is not named: there is none.
	waiting := &model.Driver{ID: "driver-20260101000000-8", State: model.DriverRelaunching, Attempt: 2, Message: "worker w3 lost",
		Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w3", Runs: 2}}}
	if got, want := progressLine(waiting), "driver-20260101000000-8 RELAUNCHING: worker w3 lost"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A DROVER_ variable that no flag reads is named in a warning; the ones
// with meanings of their own are not.
func TestWarnUnknownEnv(t *testing.T) {
	t.Setenv("DROVER_SUBMIT_TOKEN_FLIE", "x")
	t.Setenv("DROVER_TOKEN_FILE", "y")
	t.Setenv("DROVER_RAFT_PORT", "7101")
	fs := pflag.NewFlagSet("drover master", pflag.ContinueOnError)
	fs.Int("raft-port", 7101, "")
	var buf strings.Builder
	warnUnknownEnv(fs, &buf)
	if out := buf.String(); !strings.Contains(out, "DROVER_SUBMIT_TOKEN_FLIE") || strings.Contains(out, "DROVER_TOKEN_FILE ") || strings.Contains(out, "DROVER_RAFT_PORT") {
		t.Fatalf("warnings: %q", out)
	}
}
