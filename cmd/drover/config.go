package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

// envName is the environment variable of a flag: DROVER_ and the flag's
// name upper-cased, dashes as underscores (--raft-port: DROVER_RAFT_PORT).
func envName(flag string) string {
	return "DROVER_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// notFromEnv lists flags whose variable is read elsewhere: $DROVER_GOSSIP_KEY
// is one of three sources loadGossipKey weighs itself.
var notFromEnv = []string{"gossip-key"}

// addConfigFlag adds --config to fs; parseConfigured then fills the flags.
func addConfigFlag(fs *pflag.FlagSet) *string {
	return fs.String("config", os.Getenv("DROVER_CONFIG"), `JSON file of flag values, e.g. {"bind": "10.0.0.1", "join": ["10.0.0.1:7103"]}; every flag may also come from $DROVER_<FLAG> (--log-level: $DROVER_LOG_LEVEL); the command line wins, then the environment, then the file [$DROVER_CONFIG]`)
}

// parseConfigured parses args into fs, then gives every flag the command
// line did not set its value from the environment (envName) or, failing
// that, from the JSON config file, the way Nomad and Consul layer their
// configuration. Unknown keys in the file and values a flag refuses are
// errors that name the key or variable.
func parseConfigured(fs *pflag.FlagSet, config *string, args []string) error {
	// --help names each flag's variable.
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" && !slices.Contains(notFromEnv, f.Name) && !strings.Contains(f.Usage, "[$") {
			f.Usage += " [$" + envName(f.Name) + "]"
		}
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	file, err := readConfig(*config)
	if err != nil {
		return err
	}
	for key := range file {
		if fs.Lookup(key) == nil || key == "config" {
			return fmt.Errorf("config %s: unknown key %q (keys are the flags' names)", *config, key)
		}
	}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "config" {
			return
		}
		if !slices.Contains(notFromEnv, f.Name) {
			if v, ok := os.LookupEnv(envName(f.Name)); ok {
				if err := fs.Set(f.Name, v); err != nil {
					errs = append(errs, fmt.Errorf("$%s: %w", envName(f.Name), err))
				}
				return
			}
		}
		if v, ok := file[f.Name]; ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("config %s: %q: %w", *config, f.Name, err))
			}
		}
	})
	warnUnknownEnv(fs, os.Stderr)
	return errors.Join(errs...)
}

// otherEnv are DROVER_ variables with meanings beyond a flag of the same
// name: the client's, the secrets', and those a worker sets for programs
// (with the DROVER_RESOURCE_<NAME> of each custom resource a program
// holds).
var otherEnv = []string{
	"DROVER_CONFIG", "DROVER_OPERATOR_TOKEN", "DROVER_SUBMIT_TOKEN", "DROVER_NODE_TOKEN", "DROVER_GOSSIP_KEY", "DROVER_RAFT_KEY",
	"DROVER_CACERT", "DROVER_CLIENT_CERT", "DROVER_CLIENT_KEY", "DROVER_TOKEN", "DROVER_TOKEN_FILE", "DROVER_MASTERS",
	"DROVER_DRIVER_ID", "DROVER_ATTEMPT", "DROVER_RUN", "DROVER_WORKER_ID", "DROVER_APP_ID", "DROVER_EXECUTOR_ID",
	"DROVER_EXECUTOR_CORES", "DROVER_EXECUTOR_MEMORY_MB", "DROVER_DRIVER_CORES", "DROVER_DRIVER_MEMORY_MB",
}

// warnUnknownEnv says, on w, which DROVER_ variables no flag of fs reads:
// a misspelt $DROVER_SUBMIT_TOKEN_FLIE would otherwise start a master
// without its token, silently.
func warnUnknownEnv(fs *pflag.FlagSet, w io.Writer) {
	known := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "DROVER_") && !known[name] && !slices.Contains(otherEnv, name) && !strings.HasPrefix(name, model.ResourceEnv("")) {
			fmt.Fprintf(w, "drover: warning: $%s matches no flag of %s; ignored\n", name, fs.Name())
		}
	}
}

// readConfig reads a JSON object of flag values: strings, numbers, booleans,
// or arrays of strings for repeatable flags (joined with commas).
func readConfig(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := strictjson.Decode(bytes.NewReader(b), &raw); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, fmt.Errorf("config %s: %q: %w", path, k, err)
		}
		switch x := x.(type) {
		case string:
			out[k] = x
		case float64, bool:
			out[k] = strings.TrimSpace(string(v))
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("config %s: %q: arrays must hold strings", path, k)
				}
				parts[i] = s
			}
			out[k] = strings.Join(parts, ",")
		default:
			return nil, fmt.Errorf("config %s: %q: want a string, number, boolean or array of strings", path, k)
		}
	}
	return out, nil
}
