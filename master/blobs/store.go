// Package blobs is one master's store of uploaded files (drover client
// submit --upload): one file per SHA-256 in a directory of its own
// (DATA_DIR/blobs), named by its digest, so that a file is kept once
// however often it is uploaded and a name is a promise about the bytes.
//
// A file enters the store whole or not at all. It is written to a temp
// file in the same directory while its digest is computed, fsynced, and
// renamed to its name only when the digest matches the name; the directory
// is fsynced after the rename, so a file the store said it holds survives
// a crash of the machine. The temp file of an upload that fails (a digest
// mismatch, a body over the bound, a client gone half-way, a full disk) is
// removed at once, and those a crash left behind are removed when the
// store opens.
//
// The store knows nothing of other masters or of the tables: package
// blobsync keeps copies on the other voters and deletes what no live
// driver or app names.
package blobs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// tempPrefix starts the name of every file being written. A digest never
// starts with a dot, so a temp file can never be taken for a stored one.
const tempPrefix = ".upload-"

// Info describes one stored file.
type Info struct {
	// SHA256 is the file's digest and name, 64 lowercase hex digits.
	SHA256 string
	// Size is its length in bytes.
	Size int64
	// Stored is when the file was stored, or last uploaded again (the
	// file's modification time): garbage collection's grace period counts
	// from it.
	Stored time.Time
}

// Store is the directory of uploaded files. It is safe for concurrent use;
// several processes must not share one directory.
type Store struct {
	dir string
	// max bounds one file, total the bytes of the stored files and those
	// being written together.
	max, total int64

	// mu orders what changes which names exist (renames, deletions) with
	// the refreshes of a stored file's time, so that a file uploaded again
	// is never deleted for being old; and it guards files, bytes and
	// writing.
	mu    sync.Mutex
	files int
	bytes int64
	// writing is the bytes the writes in progress hold of total: each its
	// declared length, or what it has written when it declared none.
	writing int64
}

// Open opens the store in dir, creating it (mode 0700) when missing, and
// removes the temp files an interrupted write left there. maxSize bounds
// one file (--max-upload), maxTotal the bytes of the stored files and of
// the files being written together (--max-upload-store), both in bytes;
// both must be positive. A store that holds more than maxTotal already (a
// bound lowered) opens, keeps its files, and takes no new one until
// deletions make room.
func Open(dir string, maxSize, maxTotal int64) (*Store, error) {
	if maxSize <= 0 || maxTotal <= 0 {
		return nil, fmt.Errorf("upload store: the bounds on a file's size and the store's must be positive, not %d and %d", maxSize, maxTotal)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("upload store: %w", err)
	}
	s := &Store{dir: dir, max: maxSize, total: maxTotal}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("upload store: %w", err)
	}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), tempPrefix):
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("upload store: remove an interrupted upload: %w", err)
			}
		case model.IsSHA256(e.Name()) && e.Type().IsRegular():
			fi, err := e.Info()
			if err != nil {
				return nil, fmt.Errorf("upload store: %w", err)
			}
			s.files++
			s.bytes += fi.Size()
		}
	}
	return s, nil
}

// Max is the bound on one file's size, in bytes.
func (s *Store) Max() int64 { return s.max }

// Usage is how many files the store holds and their bytes.
func (s *Store) Usage() (files int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files, s.bytes
}

// Put stores the file r carries under its digest sum. size is the length
// the sender declared (Content-Length), -1 when it declared none. It
// returns the file's Info and whether the bytes were new to the store.
// The bytes a write takes count against the store's bound while it runs:
// its declared length from the start, or what it has written so far.
//
// A file the store holds already is not read again: its stored time is
// refreshed, which restarts its grace period, and r is left unread, so a
// sender that waits (Expect: 100-continue) never sends the bytes. Otherwise
// Put reads r to its end and keeps the file only when it hashes to sum.
//
// Errors wrap one sentinel of package api and change nothing:
// ErrInvalidRequest for a sum that is not 64 lowercase hex digits, a body
// that hashes to another digest, is shorter or longer than size, or ends
// in a read error (the sender went away); ErrTooLarge for a size, declared
// or read, over Max (refused before reading when declared); ErrNoStorage
// for a file that would take the store past its bound (refused before
// reading when its declared size says so, while reading otherwise);
// ErrUnavailable when this machine cannot write it (a full disk), which
// another master may well do.
func (s *Store) Put(sum string, size int64, r io.Reader) (Info, bool, error) {
	if err := checkSum(sum); err != nil {
		return Info{}, false, err
	}
	if size > s.max {
		return Info{}, false, s.tooLarge(sum)
	}
	if info, ok, err := s.refresh(sum, size); ok || err != nil {
		return info, false, err
	}
	res := &reservation{s: s, sum: sum}
	if size >= 0 {
		if err := res.take(size); err != nil {
			return Info{}, false, err
		}
	}
	tmp, n, err := s.write(sum, size, r, res)
	s.mu.Lock()
	defer s.mu.Unlock()
	// What the write held of the bound becomes the file's bytes below, in
	// this one hold of the lock, or is free again.
	s.writing -= res.held
	if err != nil {
		return Info{}, false, err
	}
	if info, ok, err := s.refreshLocked(sum, n); ok || err != nil {
		// The same file arrived twice at once: the first rename won.
		_ = os.Remove(tmp)
		return info, false, err
	}
	path := s.path(sum)
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return Info{}, false, unwritable(sum, err)
	}
	if err := syncDir(s.dir); err != nil {
		// The file is whole under its name; only its durability across
		// a crash of the machine is in doubt, and the caller will not
		// count this copy. Leave it: removing it could fail the same way.
		s.files++
		s.bytes += n
		return Info{}, false, unwritable(sum, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Info{}, false, unwritable(sum, err)
	}
	s.files++
	s.bytes += n
	return Info{SHA256: sum, Size: n, Stored: fi.ModTime()}, true, nil
}

// write copies r into a new temp file while hashing it, each byte taken
// from the store's bound (res) before it is written, syncs it, and returns
// its name and length once its digest is sum; on any failure the temp file
// is gone.
func (s *Store) write(sum string, size int64, r io.Reader, res *reservation) (_ string, n int64, err error) {
	f, err := os.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return "", 0, unwritable(sum, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	h := sha256.New()
	body := &readErr{r: io.LimitReader(r, s.max+1)}
	n, err = io.Copy(io.MultiWriter(res, f, h), body)
	switch {
	case errors.Is(err, api.ErrNoStorage):
		return "", 0, err
	case body.err != nil:
		return "", 0, api.Errorf(api.ErrInvalidRequest, "upload %s interrupted after %d bytes: %v: nothing stored", sum, n, body.err)
	case err != nil:
		return "", 0, unwritable(sum, err)
	case n > s.max:
		return "", 0, s.tooLarge(sum)
	case size >= 0 && n != size:
		return "", 0, api.Errorf(api.ErrInvalidRequest, "upload %s: the body has %d bytes, not the %d declared: nothing stored", sum, n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return "", 0, api.Errorf(api.ErrInvalidRequest, "upload %s: the body hashes to %s: nothing stored", sum, got)
	}
	if err = f.Sync(); err != nil {
		return "", 0, unwritable(sum, err)
	}
	if err = f.Close(); err != nil {
		return "", 0, unwritable(sum, err)
	}
	return tmp, n, nil
}

// refresh is refreshLocked under the lock.
func (s *Store) refresh(sum string, size int64) (Info, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshLocked(sum, size)
}

// refreshLocked reports whether sum is stored, and if so sets its stored
// time to now. A size (not -1) other than the file's is refused: no body of
// that length can hash to sum.
func (s *Store) refreshLocked(sum string, size int64) (Info, bool, error) {
	path := s.path(sum)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Info{}, false, nil
	case err != nil:
		return Info{}, false, unwritable(sum, err)
	case size >= 0 && size != fi.Size():
		return Info{}, false, api.Errorf(api.ErrInvalidRequest, "upload %s is a file of %d bytes, not %d", sum, fi.Size(), size)
	}
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		return Info{}, false, unwritable(sum, err)
	}
	return Info{SHA256: sum, Size: fi.Size(), Stored: now}, true, nil
}

// File opens a stored file for reading; the caller closes it. A file
// deleted while open stays readable through it. An unknown sum wraps
// api.ErrUnknownBlob, a malformed one api.ErrInvalidRequest.
func (s *Store) File(sum string) (*os.File, Info, error) {
	if err := checkSum(sum); err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(s.path(sum))
	if err != nil {
		return nil, Info{}, notHeld(sum, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, Info{}, notHeld(sum, err)
	}
	return f, Info{SHA256: sum, Size: fi.Size(), Stored: fi.ModTime()}, nil
}

// Stat describes a stored file; errors as File's.
func (s *Store) Stat(sum string) (Info, error) {
	if err := checkSum(sum); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(s.path(sum))
	if err != nil {
		return Info{}, notHeld(sum, err)
	}
	return Info{SHA256: sum, Size: fi.Size(), Stored: fi.ModTime()}, nil
}

// List describes every stored file, ordered by digest.
func (s *Store) List() ([]Info, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("upload store: %w", err)
	}
	out := make([]Info, 0, len(entries))
	for _, e := range entries {
		if !model.IsSHA256(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return nil, fmt.Errorf("upload store: %w", err)
		}
		out = append(out, Info{SHA256: e.Name(), Size: fi.Size(), Stored: fi.ModTime()})
	}
	return out, nil
}

// Delete removes the file sum unless it was stored, or uploaded again, at
// or after storedBefore, and reports whether it did. Taking the time with
// the deletion, under the lock Put refreshes under, means a file a client
// uploads again while garbage collection looks at it is kept.
func (s *Store) Delete(sum string, storedBefore time.Time) (bool, error) {
	if err := checkSum(sum); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.path(sum)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("upload store: %w", err)
	case !fi.ModTime().Before(storedBefore):
		return false, nil
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("upload store: %w", err)
	}
	s.files--
	s.bytes -= fi.Size()
	// A deletion lost in a crash leaves a file garbage collection finds
	// again, so the directory's sync only hastens it.
	_ = syncDir(s.dir)
	return true, nil
}

func (s *Store) path(sum string) string { return filepath.Join(s.dir, sum) }

// reservation is what one write in progress holds of the store's bound:
// held bytes, of which it has written written. As an io.Writer it takes
// more as bytes come that it does not hold yet, and refuses them when the
// store has no room, before they reach the file.
type reservation struct {
	s             *Store
	sum           string
	held, written int64
}

// take holds n more bytes of the bound, or refuses them with an error
// wrapping api.ErrNoStorage when the stored files with the writes in
// progress would pass it.
func (r *reservation) take(n int64) error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+s.writing+n > s.total {
		what := fmt.Sprintf("upload %s of %d bytes", r.sum, n)
		if r.held > 0 || r.written > 0 {
			what = fmt.Sprintf("upload %s, past %d bytes,", r.sum, r.written)
		}
		return api.Errorf(api.ErrNoStorage, "%s would take this master's store past --max-upload-store of %d bytes (%d stored, %d being written): nothing stored",
			what, s.total, s.bytes, s.writing)
	}
	s.writing += n
	r.held += n
	return nil
}

func (r *reservation) Write(p []byte) (int, error) {
	if more := r.written + int64(len(p)) - r.held; more > 0 {
		if err := r.take(more); err != nil {
			return 0, err
		}
	}
	r.written += int64(len(p))
	return len(p), nil
}

func (s *Store) tooLarge(sum string) error {
	return api.Errorf(api.ErrTooLarge, "upload %s exceeds this master's bound of %d bytes (--max-upload): nothing stored", sum, s.max)
}

func checkSum(sum string) error {
	if !model.IsSHA256(sum) {
		return api.Errorf(api.ErrInvalidRequest, "%q is not a SHA-256 in lowercase hex (64 digits 0-9a-f)", sum)
	}
	return nil
}

func notHeld(sum string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return api.Errorf(api.ErrUnknownBlob, "no uploaded file %s here", sum)
	}
	return fmt.Errorf("upload store: %w", err)
}

func unwritable(sum string, err error) error {
	return api.Errorf(api.ErrUnavailable, "cannot store upload %s here: %v", sum, rootPathError(err))
}

// rootPathError drops the temp file's path from an error about it: the
// reason is what a client can act on.
func rootPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readErr remembers the error of the reader it wraps, so that a failed
// copy can tell a sender that went away from a disk that failed.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
