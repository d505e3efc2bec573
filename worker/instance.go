package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-project/drover/internal/atomicfile"
)

// InstanceFile is the name, in the work dir, of the file holding the
// worker's instance ID: a random ID made the first time a worker uses the
// work dir. A restarted worker on the same dir is the same instance and
// takes its place at once; a process claiming the same worker ID from
// another dir is a different instance, which the leader refuses while the
// first is alive.
const InstanceFile = "worker.instance"

// loadInstance returns the instance ID kept in dir, making one if there is
// none. Call it with the work dir's lock (worker.db) held.
func loadInstance(dir string) (string, error) {
	path := filepath.Join(dir, InstanceFile)
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) == 32 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	s := hex.EncodeToString(id[:])
	if err := atomicfile.Replace(path, []byte(s+"\n"), 0o600, false); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return s, nil
}
