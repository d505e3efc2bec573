package artifact

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	getter "github.com/hashicorp/go-getter/v2"
	"github.com/ulikunitz/xz"
)

// maxLinkTarget bounds a zip symlink's target, which zip stores as the
// entry's contents.
const maxLinkTarget = 4096

// member is one entry of an archive, as scan finds it.
type member struct {
	name string // cleaned, relative, slash-separated
	kind memberKind
	// target is a link's target: the path a symlink holds, or the
	// archive path of a hard link's file.
	target string
}

type memberKind uint8

const (
	memberFile memberKind = iota
	memberDir
	memberSymlink
	memberHardlink
)

// unpack unpacks the archive src of format (one of model.ArchiveFormats,
// "tgz" excepted) into dir, which must not exist yet.
//
// go-getter's decompressors do the unpacking, with their bounds on the
// number of entries and the bytes written. They refuse entries with a
// ".." element but fall short in three ways, which scan covers by
// reading the archive first and refusing: an absolute name (they put it
// under dir, silently), a link (they write it as an empty file, or, from
// a zip, as a file holding the target's path), and an entry that is not a
// file, directory or link (a device, a FIFO: an empty file). A zip entry
// whose compression method is unknown would also make go-getter's zip
// decompressor call Close on a nil reader and panic.
//
// Links are then made by unpack itself, once everything else is in place:
// hard links to files of the archive, and symlinks whose targets are
// relative and resolve, on disk, to something inside dir. Nothing is ever
// written through a link.
func unpack(src, dir, format string, lim Limits) error {
	members, err := scan(src, format, lim)
	if err != nil {
		return err
	}
	d, ok := getter.LimitedDecompressors(lim.MaxFiles+1, lim.MaxUnpackedSize)[format]
	if !ok {
		return fmt.Errorf("unknown archive type %q", format)
	}
	// Their tar readers count the end of the archive as an entry; scan
	// has bounded the entries to MaxFiles exactly, hence the one more.
	if err := d.Decompress(dir, src, true, 0); err != nil {
		return errors.New(oneLine(err.Error()))
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	// Hard links first: no symlink exists yet to lead them astray.
	for _, kind := range []memberKind{memberHardlink, memberSymlink} {
		for _, m := range members {
			if m.kind != kind {
				continue
			}
			p := filepath.Join(dir, filepath.FromSlash(m.name))
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if kind == memberHardlink {
				err = os.Link(filepath.Join(dir, filepath.FromSlash(m.target)), p)
			} else {
				err = os.Symlink(m.target, p)
			}
			if err != nil {
				return err
			}
		}
	}
	// Each symlink checked on its own can still escape through another
	// (a -> .., b -> a/../x): resolving them on disk catches every chain.
	for _, m := range members {
		if m.kind != memberSymlink {
			continue
		}
		to, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.FromSlash(m.name)))
		if err != nil {
			return fmt.Errorf("symlink %s -> %s points to nothing in the archive", m.name, m.target)
		}
		if to != root && !strings.HasPrefix(to, root+string(filepath.Separator)) {
			return fmt.Errorf("symlink %s -> %s points out of the archive", m.name, m.target)
		}
	}
	return nil
}

// scan reads the archive's entries and refuses the archive for what
// unpack lists, for more entries than lim.MaxFiles or more bytes than
// lim.MaxUnpackedSize, for an entry below one that is not a directory,
// for a name given twice and for a link whose target leaves the archive.
func scan(src, format string, lim Limits) ([]member, error) {
	var members []member
	var err error
	if format == "zip" {
		members, err = scanZip(src, lim)
	} else {
		members, err = scanTar(src, format, lim)
	}
	if err != nil {
		return nil, err
	}
	kinds := make(map[string]memberKind, len(members))
	for _, m := range members {
		if k, ok := kinds[m.name]; ok && (k != memberDir || m.kind != memberDir) {
			return nil, fmt.Errorf("entry %s appears twice", m.name)
		}
		kinds[m.name] = m.kind
	}
	for _, m := range members {
		for p := path.Dir(m.name); p != "." && p != "/"; p = path.Dir(p) {
			if k, ok := kinds[p]; ok && k != memberDir {
				return nil, fmt.Errorf("entry %s is below %s, which is not a directory", m.name, p)
			}
		}
		switch m.kind {
		case memberHardlink:
			if k, ok := kinds[m.target]; !ok || k != memberFile {
				return nil, fmt.Errorf("hard link %s -> %s: not a file of the archive", m.name, m.target)
			}
		case memberSymlink:
			if m.target == "" || path.IsAbs(m.target) {
				return nil, fmt.Errorf("symlink %s -> %q points out of the archive", m.name, m.target)
			}
			if to := path.Join(path.Dir(m.name), m.target); to == ".." || strings.HasPrefix(to, "../") {
				return nil, fmt.Errorf("symlink %s -> %s points out of the archive", m.name, m.target)
			}
		}
	}
	return members, nil
}

// counter enforces lim's bounds as entries are found.
type counter struct {
	lim   Limits
	files int
	bytes int64
}

func (c *counter) add(size int64) error {
	c.files++
	c.bytes += size
	switch {
	case c.files > c.lim.MaxFiles:
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, c.lim.MaxFiles)
	case c.bytes > c.lim.MaxUnpackedSize:
		return fmt.Errorf("%w: more than %s unpacked", ErrTooLarge, humanSize(c.lim.MaxUnpackedSize))
	}
	return nil
}

func scanTar(src, format string, lim Limits) ([]member, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	switch format {
	case "tar.gz":
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("not a tar.gz: %v", err)
		}
		defer gz.Close()
		r = gz
	case "tar.bz2":
		r = bzip2.NewReader(f)
	case "tar.xz":
		if r, err = xz.NewReader(f); err != nil {
			return nil, fmt.Errorf("not a tar.xz: %v", err)
		}
	}
	tr := tar.NewReader(r)
	c := counter{lim: lim}
	var members []member
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a %s: %v", format, err)
		}
		m := member{}
		switch hdr.Typeflag {
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
			continue
		case tar.TypeReg, tar.TypeGNUSparse:
			m.kind = memberFile
		case tar.TypeDir:
			m.kind = memberDir
		case tar.TypeSymlink:
			m.kind, m.target = memberSymlink, hdr.Linkname
		case tar.TypeLink:
			m.kind = memberHardlink
			if m.target, err = cleanName(hdr.Linkname); err != nil {
				return nil, fmt.Errorf("hard link %s: %v", hdr.Name, err)
			}
		default:
			return nil, fmt.Errorf("entry %s is not a file, directory or link (tar type %q)", hdr.Name, hdr.Typeflag)
		}
		if m.name, err = cleanName(hdr.Name); err != nil {
			return nil, err
		}
		if err := c.add(hdr.Size); err != nil {
			return nil, err
		}
		if m.name != "." {
			members = append(members, m)
		}
	}
	if len(members) == 0 {
		return nil, errors.New("empty archive")
	}
	return members, nil
}

func scanZip(src string, lim Limits) ([]member, error) {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return nil, fmt.Errorf("not a zip: %v", err)
	}
	defer zr.Close()
	c := counter{lim: lim}
	var members []member
	for _, zf := range zr.File {
		m := member{}
		if m.name, err = cleanName(zf.Name); err != nil {
			return nil, err
		}
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			m.kind = memberDir
		case mode&fs.ModeSymlink != 0:
			m.kind = memberSymlink
		case mode.IsRegular():
			m.kind = memberFile
		default:
			return nil, fmt.Errorf("entry %s is not a file, directory or link (mode %s)", zf.Name, mode)
		}
		if err := c.add(int64(zf.UncompressedSize64)); err != nil {
			return nil, err
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, fmt.Errorf("entry %s: %v", zf.Name, err)
		}
		if m.kind == memberSymlink {
			b, err := io.ReadAll(io.LimitReader(rc, maxLinkTarget+1))
			if err != nil || len(b) > maxLinkTarget {
				rc.Close()
				return nil, fmt.Errorf("symlink %s: unreadable target", zf.Name)
			}
			m.target = string(b)
		}
		rc.Close()
		if m.name != "." {
			members = append(members, m)
		}
	}
	if len(members) == 0 {
		return nil, errors.New("empty archive")
	}
	return members, nil
}

// cleanName is an entry's name made relative and clean, or an error for
// one that is absolute or climbs out with "..". A backslash counts as a
// separator, as go-getter counts it.
func cleanName(name string) (string, error) {
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) {
		return "", fmt.Errorf("entry %s has an absolute path", name)
	}
	for _, el := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return "", fmt.Errorf("entry %s leaves the directory", name)
		}
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("entry %q has a NUL byte", name)
	}
	return path.Clean(name), nil
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
