package model

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by Apply, wrapped with the offending ID. Callers map them
// to HTTP status codes with errors.Is.
var (
	ErrUnknownDriver  = errors.New("unknown driver")
	ErrUnknownWorker  = errors.New("unknown worker")
	ErrDriverEnded    = errors.New("driver already ended")
	ErrDuplicateID    = errors.New("duplicate ID")
	ErrInvalidCommand = errors.New("invalid command")
	ErrUnknownApp     = errors.New("unknown application")
	ErrAppEnded       = errors.New("application already ended")
	// ErrUnknownExecutor: an executor ID the app never had.
	ErrUnknownExecutor = errors.New("unknown executor")
	// ErrStaleAttempt: a driver attempt that is no longer the running one
	// tried to register an app.
	ErrStaleAttempt = errors.New("not the running attempt")
)

// checkProgram checks the program of a spec, a driver's or each of an
// application's executors': a non-empty argv whose program name is not
// empty, environment names that are valid POSIX names and not set by
// Drover itself, and positive cores and memory (MiB). The error is one
// line saying what is wrong and wraps no sentinel, as the specs' Validate.
func checkProgram(argv []string, env map[string]string, cores int, memoryMB int64) error {
	switch {
	case len(argv) == 0 || argv[0] == "":
		return errors.New("the program is empty")
	case cores <= 0:
		return fmt.Errorf("cores must be positive, got %d", cores)
	case memoryMB <= 0:
		return fmt.Errorf("memory must be positive, got %d MiB", memoryMB)
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return errors.New("an argument contains a NUL byte")
		}
	}
	for k, v := range env {
		if !validEnvName(k) {
			return fmt.Errorf("environment name %q is not [A-Za-z_][A-Za-z0-9_]*", k)
		}
		if reservedEnv[k] {
			return fmt.Errorf("environment name %s is set by Drover itself", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("environment value of %s contains a NUL byte", k)
		}
	}
	return nil
}

// Bounds on what one driver, or one executor, asks for at submission
// (CheckAsked). No worker offers more, and the placement arithmetic, the
// UI's float64 GiB and Spark's own fields stay exact below them.
const (
	// MaxCores is 65,536 cores (2^16): more than any one machine has.
	MaxCores = 1 << 16
	// MaxMemoryMB is 2^31-1 MiB, about 2 PiB: Spark keeps a driver's
	// and an executor's memory in an Int of MiB
	// (Utils.memoryStringToMb).
	MaxMemoryMB = 1<<31 - 1
)

// CheckAsked refuses cores above MaxCores or memory above MaxMemoryMB;
// what names the asker ("driver", "executor"). Such a request could only
// wait for ever. A master checks it before it commits a submission, and
// the CLI before it sends one; the tables never do (DriverSpec.Validate),
// so entries committed before the bounds apply as they did.
func CheckAsked(what string, cores int, memoryMB int64) error {
	switch {
	case cores > MaxCores:
		return fmt.Errorf("%s cores %d exceed %d, more than any worker offers", what, cores, MaxCores)
	case memoryMB > MaxMemoryMB:
		return fmt.Errorf("%s memory %d MiB exceeds %d MiB (Spark's largest, an Int of MiB)", what, memoryMB, MaxMemoryMB)
	}
	return nil
}

// MaxUserLen bounds a user name, in bytes: useradd's own limit on Linux
// (shadow-utils' USER_NAME_MAX_LENGTH), so that every name that passes
// can exist on a worker.
const MaxUserLen = 32

// CheckUser checks the user a driver's, or an application's executors',
// programs are to run as: "" for each worker's default (its --run-as),
// or a portable user name as useradd accepts one, [a-z_][a-z0-9_-]*[$]?
// of at most MaxUserLen bytes. A numeric uid is refused: the worker's
// --allowed-users lists names, one uid is different people on different
// workers, and useradd refuses all-digit names so that a name never
// reads as a uid. This checks the form only: whether a worker may run a
// program as the user is the worker's to decide when it starts one. The
// error is one line and, as DriverSpec.Validate's, wraps no sentinel.
func CheckUser(name string) error {
	if len(name) > MaxUserLen {
		return fmt.Errorf("user name exceeds %d bytes (it has %d)", MaxUserLen, len(name))
	}
	if name == "" || validUser(name) {
		return nil
	}
	if strings.Trim(name, "0123456789") == "" {
		return fmt.Errorf("user %q is a numeric uid: give a user name", name)
	}
	return fmt.Errorf("user %q is not a portable user name ([a-z_][a-z0-9_-]*[$]?)", name)
}

// validUser reports whether s, not empty, matches [a-z_][a-z0-9_-]*[$]?,
// shadow-utils' is_valid_user_name without its relaxed mode.
func validUser(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		case i > 0 && c == '$' && i == len(s)-1:
		default:
			return false
		}
	}
	return true
}

// invalidCommand wraps a check's error in ErrInvalidCommand ("invalid
// command: ..."); nil stays nil.
func invalidCommand(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
}

// reservedEnv names the variables drivers and executors get from their
// worker.
var reservedEnv = map[string]bool{
	"DROVER_DRIVER_ID": true, "DROVER_ATTEMPT": true, "DROVER_WORKER_ID": true, "DROVER_MASTERS": true,
	"DROVER_RUN": true, "DROVER_APP_ID": true, "DROVER_EXECUTOR_ID": true, "DROVER_EXECUTOR_CORES": true, "DROVER_EXECUTOR_MEMORY_MB": true,
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
