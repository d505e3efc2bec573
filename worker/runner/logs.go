package runner

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/drover-project/drover/worker/unitdir"
)

// The program's stdout and stderr are each one logical stream of bytes,
// numbered from 0 across every run of the attempt. The runner keeps a
// stream in files of at most Spec.LogMaxFileSize bytes, at most
// Spec.LogMaxFiles of them, as Nomad's logs block does (max_file_size,
// max_files): when the newest file is full the next byte opens a new one,
// and the oldest beyond the count is deleted. Each file is named by the
// logical offset of its first byte (LogFileName), so a reader finds any
// offset from the names and sizes alone, across rotations and across a
// restart of the worker that reads them, and `cat stdout.*` prints what is
// kept, in order.

// rotator writes one stream into its log files. Only the runner's copy of
// the stream writes, one goroutine per stream, so it needs no lock.
type rotator struct {
	dir      *os.Root
	stream   string
	maxSize  int64
	maxFiles int
	// starts are the offsets of the files kept, oldest first; the last
	// is f's.
	starts []int64
	f      *os.File
	// size is how many bytes f holds.
	size int64
}

// openRotator opens stream's newest log file in dir for appending, or
// creates the first one. Files already there (none, for a new attempt)
// are carried on from.
func openRotator(dir *os.Root, stream string, maxSize int64, maxFiles int) (*rotator, error) {
	r := &rotator{dir: dir, stream: stream, maxSize: maxSize, maxFiles: maxFiles}
	var err error
	if r.starts, _, err = unitdir.LogFileStarts(dir, stream); err != nil {
		return nil, err
	}
	if len(r.starts) == 0 {
		r.starts = []int64{0}
	}
	last := r.starts[len(r.starts)-1]
	if r.f, err = dir.OpenFile(unitdir.LogFileName(stream, last), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600); err != nil {
		return nil, err
	}
	st, err := r.f.Stat()
	if err != nil {
		r.f.Close()
		return nil, err
	}
	r.size = st.Size()
	return r, nil
}

// Write appends p to the stream, opening a new file whenever the newest
// is full. On an error (a full disk) the bytes not written are lost and
// the stream goes on without them; n counts those written.
func (r *rotator) Write(p []byte) (n int, err error) {
	for len(p) > 0 {
		if r.size >= r.maxSize {
			if err := r.rotate(); err != nil {
				return n, err
			}
		}
		chunk := p[:min(int64(len(p)), r.maxSize-r.size)]
		m, err := r.f.Write(chunk)
		n += m
		r.size += int64(m)
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// rotate starts the next file at the stream's current end, then deletes
// the oldest files beyond maxFiles. The new file is empty when the count
// is briefly exceeded, so the bytes kept never exceed maxFiles*maxSize.
func (r *rotator) rotate() error {
	next := r.starts[len(r.starts)-1] + r.size
	f, err := r.dir.OpenFile(unitdir.LogFileName(r.stream, next), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	r.f.Close()
	r.f, r.size = f, 0
	r.starts = append(r.starts, next)
	for len(r.starts) > r.maxFiles {
		if err := r.dir.Remove(unitdir.LogFileName(r.stream, r.starts[0])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		r.starts = r.starts[1:]
	}
	return nil
}

// Close closes the newest file.
func (r *rotator) Close() error { return r.f.Close() }
