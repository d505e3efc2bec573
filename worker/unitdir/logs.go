package unitdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// logOffsetDigits is the width of the offset in a log file's name: enough
// for any int64, so that the names sort as the offsets do.
const logOffsetDigits = 20

// LogFileName is the name of the file of stream (StdoutFile or StderrFile)
// whose first byte is at logical offset start: "stdout.00000000000010485760"
// for the second file of 10 MiB ones.
func LogFileName(stream string, start int64) string {
	return fmt.Sprintf("%s.%0*d", stream, logOffsetDigits, start)
}

// logFileStart parses a name LogFileName made for stream.
func logFileStart(stream, name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, stream+".")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// LogFileStarts lists the log files of stream in dir: the offsets their
// names start at (LogFileName), sorted, and whether dir holds the one file
// named stream that a runner wrote before rotation.
func LogFileStarts(dir *os.Root, stream string) (starts []int64, single bool, err error) {
	names, err := readDirNames(dir)
	if err != nil {
		return nil, false, err
	}
	for _, n := range names {
		if s, ok := logFileStart(stream, n); ok {
			starts = append(starts, s)
		}
		single = single || n == stream
	}
	slices.Sort(starts)
	return starts, single, nil
}

// LogRange is a part of one stream, as OpenLog found it: its bytes from
// logical offset Start up to End, read through it. The caller closes it.
type LogRange struct {
	// Start is the offset asked for or, when the bytes there were
	// rotated away, the offset of the oldest byte kept after it: where
	// the stream now starts.
	Start int64
	// End is where the bytes stop: Size, unless bytes are missing after
	// End (a machine that crashed lost part of a file), in which case a
	// read from End goes on after the gap.
	End int64
	// Size is the stream's length when it was opened: the offset just
	// past its last byte, rotated bytes counted.
	Size  int64
	r     io.Reader
	files []*os.File
}

// Read reads the range's bytes.
func (l *LogRange) Read(p []byte) (int, error) { return l.r.Read(p) }

// Close closes the range's files.
func (l *LogRange) Close() error {
	for _, f := range l.files {
		f.Close()
	}
	return nil
}

// logFile is one log file OpenLog holds open.
type logFile struct {
	start, size int64
	f           *os.File
}

// OpenLog opens stream (StdoutFile or StderrFile) of the unit directory
// dir from logical offset on, for a reader such as the worker's log
// endpoint: a stream that has not begun is empty. The files are opened
// through dir, without following a link, and must be regular: the program
// owns its directory and could swap a log for a link to a file it may not
// show. The files stay open, so a rotation while the range is read
// changes nothing in it. A directory written by a runner before rotation
// holds one file named stream, read as the file at offset 0.
func OpenLog(dir *os.Root, stream string, offset int64) (*LogRange, error) {
	if offset < 0 {
		return nil, fmt.Errorf("offset %d is negative", offset)
	}
	files, err := openLogFiles(dir, stream, offset)
	if err != nil {
		return nil, err
	}
	l := &LogRange{Start: offset, End: offset, Size: 0}
	for _, lf := range files {
		l.files = append(l.files, lf.f)
	}
	if len(files) == 0 {
		l.r = strings.NewReader("")
		return l, nil
	}
	last := files[len(files)-1]
	l.Size = last.start + last.size
	// The first file that ends past the offset holds it, or, when it
	// starts past the offset, the bytes after a part rotated away.
	i := slices.IndexFunc(files, func(lf logFile) bool { return lf.start+lf.size > offset })
	if i < 0 {
		l.Start, l.End = max(offset, l.Size), max(offset, l.Size)
		l.r = strings.NewReader("")
		return l, nil
	}
	l.Start = max(offset, files[i].start)
	l.End = l.Start
	var parts []io.Reader
	for _, lf := range files[i:] {
		if lf.start > l.End {
			break // a gap: the next read starts after it
		}
		from := l.End - lf.start
		parts = append(parts, io.NewSectionReader(lf.f, from, lf.size-from))
		l.End = lf.start + lf.size
	}
	l.r = io.MultiReader(parts...)
	return l, nil
}

// maxListings bounds how often openLogFiles lists a directory whose files
// all rotate away before it opens them.
const maxListings = 3

// openLogFiles opens the log files of stream that may hold bytes at or
// after offset, oldest first. A file deleted by a rotation between the
// listing and its opening held only older bytes than the next file and is
// left out; should every one listed be gone, the listing is read again.
func openLogFiles(dir *os.Root, stream string, offset int64) ([]logFile, error) {
	for range maxListings {
		starts, single, err := LogFileStarts(dir, stream)
		if err != nil {
			return nil, err
		}
		name := func(s int64) string { return LogFileName(stream, s) }
		if len(starts) == 0 {
			// Before rotation a runner wrote one file; or nothing yet.
			if !single {
				return nil, nil
			}
			starts, name = []int64{0}, func(int64) string { return stream }
		}
		// The newest file starting at or before offset holds it.
		first := max(0, lastAtOrBelow(starts, offset))
		var files []logFile
		for _, s := range starts[first:] {
			f, size, err := openRegular(dir, name(s))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				for _, lf := range files {
					lf.f.Close()
				}
				return nil, err
			}
			files = append(files, logFile{start: s, size: size, f: f})
		}
		if len(files) > 0 {
			return files, nil
		}
	}
	return nil, fmt.Errorf("the %s files rotate away faster than they can be opened", stream)
}

// lastAtOrBelow is the index of the last element of sorted at or below v, -1
// when there is none.
func lastAtOrBelow(sorted []int64, v int64) int {
	i, found := slices.BinarySearch(sorted, v)
	if found {
		return i
	}
	return i - 1
}

// openRegular opens name in dir for reading, refusing a link or anything
// but a regular file, and returns its size.
func openRegular(dir *os.Root, name string) (*os.File, int64, error) {
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func readDirNames(dir *os.Root) ([]string, error) {
	d, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
