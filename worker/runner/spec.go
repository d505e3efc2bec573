package runner

import (
	"os"
	"strings"
	"syscall"

	"github.com/drover-project/drover/worker/unitdir"
)

// userName is id's name, "" for the runner's own user.
func userName(id *unitdir.Identity) string {
	if id == nil {
		return ""
	}
	return id.Name
}

// credential is id as the child's credentials, nil for the runner's own.
func credential(id *unitdir.Identity) *syscall.Credential {
	if id == nil {
		return nil
	}
	return &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: id.Groups}
}

// pathEnv returns the PATH the program will see, or the runner's own when
// the spec's Env has none.
func pathEnv(s *unitdir.Spec) string {
	for i := len(s.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(s.Env[i], "PATH="); ok {
			return v
		}
	}
	return os.Getenv("PATH")
}
