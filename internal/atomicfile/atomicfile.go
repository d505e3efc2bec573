// Package atomicfile replaces a file's content so that a reader sees
// either the old or the new content, never a torn write: the worker's
// lease, instance and CA files, and the runner's spec, status and stop
// files. google/renameio does the same but always syncs, which the
// lease, rewritten every quarter lease, must not pay for; this is its
// one part drover needs.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Replace replaces path with b, of the given mode, through a temporary
// file beside it (".NAME.tmp-*", removed on error) renamed over it. The
// mode is set as given, not narrowed by the umask. With durable the file
// is synced before the rename, so that after a crash path holds the old
// or the new content; without, the rename may outlive the data, as
// costs less where the content matters only while the machine runs.
func Replace(path string, b []byte, mode fs.FileMode, durable bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil && mode != 0o600 {
		// CreateTemp makes it 0600; a chmod is not narrowed by the umask.
		err = f.Chmod(mode)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
