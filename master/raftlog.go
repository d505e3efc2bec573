package master

import (
	"context"
	"log/slog"
	"strings"
)

// levelWriter takes hclog's text lines ("[WARN]  message: key=value") and
// logs each through slog at the level it names, so that hashicorp/raft's
// warnings and errors are warnings and errors in Drover's log too.
type levelWriter struct{ log *slog.Logger }

var hclogLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[TRACE]", slog.LevelDebug - 4},
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERROR]", slog.LevelError},
}

func (w levelWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, l := range hclogLevels {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			line, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	w.log.Log(context.Background(), level, line)
	return len(p), nil
}
