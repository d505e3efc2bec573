package model

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Artifact is one file a driver attempt or an executor needs, staged into
// its directory (the program's working directory) before the program
// starts: Spark's DriverRunner.downloadUserJar, Nomad's artifact block.
// It comes either from a URL or from the masters' store of uploaded files.
//
// A submission names an artifact by Source (a URL in go-getter's
// conventions) or by Upload, Name and Mode; the master fills in the rest
// with NormalizeArtifact before the artifact enters the log, so what a log
// entry means never depends on how a later version parses URLs.
type Artifact struct {
	// Source is the artifact's URL as the user wrote it, options included
	// (http://, https:// or file://, with ?checksum=sha256:HEX and
	// ?archive=false|TYPE as go-getter reads them); empty for an upload.
	// It is kept for people: the worker fetches URL.
	Source string `json:"source,omitempty"`
	// URL is Source without Drover's options, the one fetched; empty for
	// an upload.
	URL string `json:"url,omitempty"`
	// Upload is the SHA-256 (64 lowercase hex digits) of a file in the
	// masters' store; empty for a URL.
	Upload string `json:"upload,omitempty"`
	// SHA256 is the digest (64 lowercase hex digits) the fetched bytes
	// must have (the archive itself, before unpacking); empty means
	// unverified. An upload's is Upload.
	SHA256 string `json:"sha256,omitempty"`
	// Archive is how the bytes are unpacked into Dest: one of
	// ArchiveFormats, or "" to keep them as one file named Name.
	Archive string `json:"archive,omitempty"`
	// Name is the staged file's name when Archive is "": the URL path's
	// last element, or the uploaded file's base name.
	Name string `json:"name,omitempty"`
	// Dest is the directory, relative to the unit's directory, that
	// receives the file or the archive's contents; "" for the directory
	// itself.
	Dest string `json:"dest,omitempty"`
	// Mode is the permission bits (at most 0777) of a staged file that is
	// not an archive. 0 means 0755 for a program (a file that starts with
	// "#!" or is ELF) and 0644 otherwise; an upload keeps its file's.
	Mode uint32 `json:"mode,omitempty"`
}

// ArchiveFormats are the archive types an artifact may be unpacked as,
// named as go-getter names them; each is also the file name extension that
// selects it (".tgz" stands for "tar.gz").
var ArchiveFormats = []string{"tar", "tar.gz", "tgz", "tar.bz2", "tar.xz", "zip"}

// UploadScheme prefixes an upload's digest in a Source-like string for
// people: "upload:HEX".
const UploadScheme = "upload:"

// MaxArtifacts bounds the artifacts of one driver or application.
const MaxArtifacts = 64

// ErrInvalidArtifact is wrapped by every refusal of an artifact.
var ErrInvalidArtifact = errors.New("invalid artifact")

// NormalizeArtifact checks the artifact a submission names and fills in
// its derived fields: from Source, URL, SHA256, Archive and Name; for an
// upload, SHA256 and Archive (by Name's extension). It refuses an unknown
// scheme, a checksum that is not sha256:64-hex, an unknown archive type, a
// URL with no file name, derived fields set by the caller, and a Dest that
// leaves the unit's directory. The error wraps ErrInvalidArtifact and is
// one line.
func NormalizeArtifact(a Artifact) (Artifact, error) {
	bad := func(format string, args ...any) (Artifact, error) {
		return Artifact{}, fmt.Errorf("%w: %s", ErrInvalidArtifact, fmt.Sprintf(format, args...))
	}
	if a.URL != "" || a.SHA256 != "" || a.Archive != "" {
		return bad("url, sha256 and archive are derived from source or upload; leave them out")
	}
	if err := checkDest(a.Dest); err != nil {
		return bad("%v", err)
	}
	switch {
	case a.Source != "" && a.Upload != "":
		return bad("%s names both a URL and an upload", a.Source)
	case a.Upload != "":
		if !IsSHA256(a.Upload) {
			return bad("upload %q is not a SHA-256 in lowercase hex", a.Upload)
		}
		if err := checkName(a.Name); err != nil {
			return bad("upload %s: %v", a.Upload, err)
		}
		if a.Mode > 0o777 {
			return bad("upload %s: mode %#o is more than permission bits", a.Upload, a.Mode)
		}
		a.SHA256 = a.Upload
		a.Archive = archiveByName(a.Name)
		return a, nil
	case a.Source == "":
		return bad("an artifact needs a source URL or an upload")
	}
	if a.Name != "" || a.Mode != 0 {
		return bad("%s: name and mode are for uploads; a URL's file is named by its path", a.Source)
	}
	u, err := url.Parse(a.Source)
	if err != nil {
		return bad("%s: %v", a.Source, rootURLError(err))
	}
	// The log, status, the API, the UI and the workers' logs all show an
	// artifact's URL to whoever may read the driver: no place for a
	// credential (a password, or a token as the user name).
	if u.User != nil {
		u.User = url.User("xxxxx")
		return bad("%s: an artifact URL may not carry credentials, which anyone who can read the driver would see; use a URL that needs none, or --upload the file", u.String())
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return bad("%s has no host", a.Source)
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("%s: a file URL names a path on the worker (file:///path), not host %s", a.Source, u.Host)
		}
		if !path.IsAbs(u.Path) {
			return bad("%s: a file URL needs an absolute path", a.Source)
		}
	default:
		return bad("%s: scheme %q is not http, https or file", a.Source, u.Scheme)
	}
	q := u.Query()
	forced, haveArchive := "", false
	if vs, ok := q["archive"]; ok {
		if len(vs) != 1 {
			return bad("%s: archive is given %d times", a.Source, len(vs))
		}
		forced, haveArchive = vs[0], true
		q.Del("archive")
	}
	if vs, ok := q["checksum"]; ok {
		if len(vs) != 1 {
			return bad("%s: checksum is given %d times", a.Source, len(vs))
		}
		kind, sum, ok := strings.Cut(vs[0], ":")
		switch {
		case !ok:
			return bad("%s: checksum %q is not TYPE:HEX", a.Source, vs[0])
		case kind != "sha256":
			return bad("%s: checksum type %q is not supported; use sha256", a.Source, kind)
		}
		sum = strings.ToLower(sum)
		if !IsSHA256(sum) {
			return bad("%s: checksum %q is not 64 hex digits", a.Source, sum)
		}
		a.SHA256 = sum
		q.Del("checksum")
	}
	if haveArchive || a.SHA256 != "" {
		u.RawQuery = q.Encode()
	}
	a.URL = u.String()
	name := path.Base(u.Path)
	if err := checkName(name); err != nil {
		return bad("%s: %v", a.Source, err)
	}
	switch {
	case !haveArchive:
		a.Archive = archiveByName(name)
	case forced == "false":
	case forced == "tgz":
		a.Archive = "tar.gz"
	case validArchive(forced):
		a.Archive = forced
	default:
		return bad("%s: archive %q is not false or one of %s", a.Source, forced, strings.Join(ArchiveFormats, ", "))
	}
	if a.Archive == "" {
		a.Name = name
	}
	return a, nil
}

// NormalizeArtifacts normalizes each of as (NormalizeArtifact) and refuses
// more than MaxArtifacts, and two that stage a file under the same path.
// Archives' contents are checked against each other only when unpacked.
func NormalizeArtifacts(as []Artifact) ([]Artifact, error) {
	if len(as) == 0 {
		return nil, nil
	}
	out := make([]Artifact, len(as))
	for i, a := range as {
		n, err := NormalizeArtifact(a)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	if err := CheckArtifactPaths(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ValidateArtifacts checks artifacts as they are in a log entry, by the
// invariants NormalizeArtifact establishes rather than by parsing Source
// again, so an entry keeps its meaning whatever later versions make of
// URLs: one of URL or Upload, digests in lowercase hex, a known archive
// type, a file name when not unpacked, a clean relative Dest, permission
// bits only, and no two staging the same path. The error wraps
// ErrInvalidCommand.
func ValidateArtifacts(as []Artifact) error {
	return invalidCommand(checkArtifacts(as))
}

// checkArtifacts is ValidateArtifacts' check; its error is one line that
// wraps no sentinel but, for two artifacts staging one path,
// ErrInvalidArtifact.
func checkArtifacts(as []Artifact) error {
	if len(as) > MaxArtifacts {
		return fmt.Errorf("%d artifacts, at most %d", len(as), MaxArtifacts)
	}
	for _, a := range as {
		switch {
		case (a.URL == "") == (a.Upload == ""):
			return fmt.Errorf("artifact %s needs exactly one of a URL and an upload", a)
		case a.Upload != "" && a.SHA256 != a.Upload:
			return fmt.Errorf("upload %s has digest %q", a.Upload, a.SHA256)
		case a.SHA256 != "" && !IsSHA256(a.SHA256):
			return fmt.Errorf("artifact %s: digest %q is not lowercase hex SHA-256", a, a.SHA256)
		case a.Archive != "" && (!validArchive(a.Archive) || a.Archive == "tgz"):
			return fmt.Errorf("artifact %s: unknown archive type %q", a, a.Archive)
		case a.Mode > 0o777:
			return fmt.Errorf("artifact %s: mode %#o", a, a.Mode)
		}
		if a.Archive == "" {
			if err := checkName(a.Name); err != nil {
				return fmt.Errorf("artifact %s: %v", a, err)
			}
		}
		if err := checkDest(a.Dest); err != nil {
			return fmt.Errorf("artifact %s: %v", a, err)
		}
	}
	return checkCollisions(as)
}

// String names a for people: its Source, or "upload:HEX (NAME)".
func (a Artifact) String() string {
	if a.Source != "" {
		return a.Source
	}
	return UploadScheme + a.Upload + " (" + a.Name + ")"
}

// Path is where a staged file lands relative to the unit's directory, ""
// for an archive (its contents go to Dest).
func (a Artifact) Path() string {
	if a.Archive != "" {
		return ""
	}
	return path.Join(a.Dest, a.Name)
}

// IsSHA256 says whether s is a SHA-256 digest in lowercase hex.
func IsSHA256(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// CheckArtifactPaths refuses more than MaxArtifacts normalized artifacts,
// and two that stage a file under the same path, wrapping
// ErrInvalidArtifact: the check NormalizeArtifacts makes of a list, for
// lists joined from normalized ones.
func CheckArtifactPaths(as []Artifact) error {
	if len(as) > MaxArtifacts {
		return fmt.Errorf("%w: %d artifacts, at most %d", ErrInvalidArtifact, len(as), MaxArtifacts)
	}
	return checkCollisions(as)
}

func checkCollisions(as []Artifact) error {
	seen := map[string]string{}
	for _, a := range as {
		p := a.Path()
		if p == "" {
			continue
		}
		if other, ok := seen[p]; ok {
			return fmt.Errorf("%w: %s and %s both stage %s", ErrInvalidArtifact, other, a, p)
		}
		seen[p] = a.String()
	}
	return nil
}

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == ".." || name == "/":
		return errors.New("no file name: the path must end in one")
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("file name %q has a slash or NUL", name)
	case len(name) > 255:
		return errors.New("file name longer than 255 bytes")
	}
	return nil
}

func checkDest(dest string) error {
	if dest == "" {
		return nil
	}
	switch {
	case strings.IndexByte(dest, 0) >= 0:
		return errors.New("dest has a NUL byte")
	case path.IsAbs(dest):
		return fmt.Errorf("dest %q must be relative to the working directory", dest)
	case path.Clean(dest) != dest:
		return fmt.Errorf("dest %q is not a clean path (try %q)", dest, path.Clean(dest))
	case dest == ".." || strings.HasPrefix(dest, "../"):
		return fmt.Errorf("dest %q leaves the working directory", dest)
	}
	return nil
}

// archiveByName is the archive type name's extension selects, "" for none.
func archiveByName(name string) string {
	for _, f := range ArchiveFormats {
		if strings.HasSuffix(name, "."+f) {
			if f == "tgz" {
				return "tar.gz"
			}
			return f
		}
	}
	return ""
}

func validArchive(s string) bool {
	for _, f := range ArchiveFormats {
		if s == f {
			return true
		}
	}
	return false
}

// rootURLError drops url.Error's repetition of the URL.
func rootURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
