package service

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// checkTokenAndName checks that a request carries a token (for what:
// submission, registration) of at most api.MaxTokenLen bytes and a valid
// name.
func checkTokenAndName(what, token, name string) error {
	switch {
	case token == "":
		return api.Errorf(api.ErrInvalidRequest, "a %s token is required", what)
	case len(token) > api.MaxTokenLen:
		return api.Errorf(api.ErrInvalidRequest, "token exceeds %d bytes", api.MaxTokenLen)
	}
	return validName(name)
}

// validName checks a driver's or app's name: at most 256 bytes of UTF-8
// text without control characters, since names end up in terminals, logs
// and pages.
func validName(s string) error {
	if len(s) > 256 {
		return api.Errorf(api.ErrInvalidRequest, "name exceeds 256 bytes")
	}
	if !utf8.ValidString(s) {
		return api.Errorf(api.ErrInvalidRequest, "name is not UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return api.Errorf(api.ErrInvalidRequest, "name contains the control character %U", r)
		}
	}
	return nil
}

// checkNewProgram puts on a new program (what names it: "driver",
// "executor") the bounds a master adds to its spec's Validate, which the
// tables do not check so that older log entries replay as they did:
// cores and memory no worker could offer (model.CheckAsked), and an
// environment that sets a DROVER_ variable (ownEnv).
func checkNewProgram(what string, cores int, memoryMB int64, env map[string]string) error {
	if err := model.CheckAsked(what, cores, memoryMB); err != nil {
		return invalidRequest(err)
	}
	return ownEnv(env)
}

// ownEnv refuses a program environment that sets a DROVER_ variable: the
// worker sets those (the driver's token and CA among them), and the
// replicated tables already refuse the ones they know; a new one is refused
// here, before Raft.
func ownEnv(env map[string]string) error {
	for k := range env {
		if strings.HasPrefix(k, "DROVER_") {
			return api.Errorf(api.ErrInvalidRequest, "environment name %s is reserved: DROVER_ variables are set by the worker", k)
		}
	}
	return nil
}

// maxReason bounds the free text a worker or app client gives for ending
// something, in bytes.
const maxReason = 256

// checkReason refuses free text longer than limit bytes; what names it.
func checkReason(what, s string, limit int) error {
	if len(s) > limit {
		return api.Errorf(api.ErrInvalidRequest, "%s exceeds %d bytes", what, limit)
	}
	return nil
}

// normalizeArtifacts derives what the log holds of a request's artifacts
// (model.NormalizeArtifacts); a refusal is an invalid request.
func normalizeArtifacts(as []model.Artifact) ([]model.Artifact, error) {
	out, err := model.NormalizeArtifacts(as)
	return out, invalidRequest(err)
}

// invalidRequest is the refusal of a request that failed one of the
// model's checks (model.DriverSpec.Validate, model.RegisterApp.Validate):
// "invalid request: ..." wrapping api.ErrInvalidRequest. The tables refuse
// a command that fails the same check as "invalid command"
// (model.ErrInvalidCommand); a request refused here never becomes one.
func invalidRequest(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", api.ErrInvalidRequest, err)
}
