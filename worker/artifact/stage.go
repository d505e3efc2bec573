package artifact

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/drover-project/drover/model"
)

// stagingPrefix names the temporary directory a staging builds in, in
// the unit's directory: on the same file system, so that moving its
// contents into place is a rename.
const stagingPrefix = ".drover-staging-"

// makeScratch makes the temporary directory a staging works in, in
// scratch, after removing those a runner that died while staging left
// there.
func makeScratch(scratch string) (string, error) {
	if old, err := filepath.Glob(filepath.Join(scratch, stagingPrefix+"*")); err == nil {
		for _, o := range old {
			os.RemoveAll(o)
		}
	}
	return os.MkdirTemp(scratch, stagingPrefix+"*")
}

// place copies or unpacks every artifact into a tree in tmp, the
// staging's temporary directory (makeScratch), gives it to owner (nil:
// left as made), then moves the tree's top-level entries into dir. A
// failure removes what it had moved.
func place(dir, tmp string, as []model.Artifact, es []*entry, lim Limits, owner *Owner) error {
	t := &tree{root: filepath.Join(tmp, "tree"), as: as, owners: map[string]int{}}
	if err := os.Mkdir(t.root, 0o700); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	for i, a := range as {
		var err error
		if a.Archive == "" {
			err = t.addFile(i, es[i])
		} else {
			err = t.addArchive(i, es[i], filepath.Join(tmp, "unpack-"+strconv.Itoa(i)), lim)
		}
		if err != nil {
			return fmt.Errorf("stage %s: %w", label(a), err)
		}
	}
	if owner != nil {
		if err := t.chown(*owner); err != nil {
			return fmt.Errorf("stage: %w", err)
		}
	}
	return t.moveInto(dir)
}

// tree is the staged files being assembled under root. owners maps each
// path it placed (slash-separated, relative to root) to the artifact
// (its index in as) that placed it, to name both sides of a collision.
type tree struct {
	root   string
	as     []model.Artifact
	owners map[string]int
}

func (t *tree) abs(rel string) string { return filepath.Join(t.root, filepath.FromSlash(rel)) }

// addFile copies artifact i's entry to Dest/Name with its mode. A copy,
// not a link: the program must not be able to change the cache.
func (t *tree) addFile(i int, e *entry) error {
	a := t.as[i]
	if err := t.mkdirs(a.Dest, i); err != nil {
		return err
	}
	rel := a.Path()
	if _, err := os.Lstat(t.abs(rel)); err == nil {
		return t.collision(rel)
	}
	mode := fs.FileMode(a.Mode & 0o777)
	if mode == 0 {
		mode = sniffMode(e.f)
	}
	if _, err := e.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	out, err := os.OpenFile(t.abs(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, e.f)
	if err == nil {
		err = out.Chmod(mode)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	t.owners[rel] = i
	return nil
}

// sniffMode is the mode of a file staged without one: 0755 for a program
// (a "#!" script or an ELF binary), 0644 otherwise.
func sniffMode(f *os.File) fs.FileMode {
	b := make([]byte, 4)
	n, _ := f.ReadAt(b, 0)
	if b = b[:n]; strings.HasPrefix(string(b), "#!") || string(b) == "\x7fELF" {
		return 0o755
	}
	return 0o644
}

// addArchive unpacks artifact i's entry into scratch, then merges what it
// made into Dest.
func (t *tree) addArchive(i int, e *entry, scratch string, lim Limits) error {
	a := t.as[i]
	if err := unpack(e.path, scratch, a.Archive, lim); err != nil {
		return err
	}
	if err := t.mkdirs(a.Dest, i); err != nil {
		return err
	}
	return t.merge(scratch, a.Dest, i)
}

// mkdirs makes the directories of rel for artifact i, refusing to pass
// through anything that is not a directory (a file or a symlink another
// artifact placed).
func (t *tree) mkdirs(rel string, i int) error {
	if rel == "" {
		return nil
	}
	p := ""
	for _, el := range strings.Split(rel, "/") {
		p = path.Join(p, el)
		fi, err := os.Lstat(t.abs(p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(t.abs(p), 0o755); err != nil {
				return err
			}
			t.owners[p] = i
		case err != nil:
			return err
		case !fi.IsDir():
			return t.collision(p)
		}
	}
	return nil
}

// merge moves the entries of src into rel, descending into directories
// both have; any other clash is a collision.
func (t *tree) merge(src, rel string, i int) error {
	des, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, de := range des {
		r := path.Join(rel, de.Name())
		fi, err := os.Lstat(t.abs(r))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Rename(filepath.Join(src, de.Name()), t.abs(r)); err != nil {
				return err
			}
			t.owners[r] = i
		case err != nil:
			return err
		case fi.IsDir() && de.IsDir():
			if err := t.merge(filepath.Join(src, de.Name()), r, i); err != nil {
				return err
			}
		default:
			return t.collision(r)
		}
	}
	return nil
}

// collision is the error for rel, which another artifact already placed
// (it, or a directory above it).
func (t *tree) collision(rel string) error {
	for p := rel; p != "." && p != "/"; p = path.Dir(p) {
		if i, ok := t.owners[p]; ok {
			return fmt.Errorf("%s is staged by %s too", rel, label(t.as[i]))
		}
	}
	return fmt.Errorf("%s is staged twice", rel)
}

// chown gives every entry of the tree to o. Lchown, and a walk that
// follows no link: an archive's symlinks are the tree's own, changed
// themselves, never their targets.
func (t *tree) chown(o Owner) error {
	return filepath.WalkDir(t.root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == t.root {
			return err
		}
		return os.Lchown(p, o.UID, o.GID)
	})
}

// moveInto renames the tree's top-level entries into dir, refusing names
// already in dir.
func (t *tree) moveInto(dir string) error {
	des, err := os.ReadDir(t.root)
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("stage %s: %s already exists in the directory", label(t.as[t.owners[name]]), name)
		}
	}
	var moved []string
	for _, de := range des {
		if err := os.Rename(filepath.Join(t.root, de.Name()), filepath.Join(dir, de.Name())); err != nil {
			for _, m := range moved {
				os.RemoveAll(filepath.Join(dir, m))
			}
			return fmt.Errorf("stage: %w", err)
		}
		moved = append(moved, de.Name())
	}
	return nil
}
