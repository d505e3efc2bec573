package schedule

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/drover-project/drover/model"
)

// zoneinfo is the IANA time zone database as Go's toolchain ships it
// ($GOROOT/lib/time/zoneinfo.zip, `make tzdata` copies it again). Zones
// are read from it alone, never from the host: time.LoadLocation tries
// $ZONEINFO and the system's files first, so masters on machines with
// different tzdata (or a ZONEINFO set on one) would compute different
// slots for the same schedule, and a zone one host invents would be one
// the others cannot read.
//
//go:embed zoneinfo.zip
var zoneinfo []byte

// zones is the database's index by zone name, read once.
var zones = sync.OnceValues(func() (map[string]*zip.File, error) {
	r, err := zip.NewReader(bytes.NewReader(zoneinfo), int64(len(zoneinfo)))
	if err != nil {
		return nil, err
	}
	m := make(map[string]*zip.File, len(r.File))
	for _, f := range r.File {
		m[f.Name] = f
	}
	return m, nil
})

// loaded caches the zones read, by name: at most the database's some
// 600 names, since only those load.
var loaded sync.Map

// Zone returns the IANA time zone name ("" for UTC) as the built-in
// database defines it, whatever the host's files or $ZONEINFO hold. A
// name the database lacks, "Local" included, or one past
// model.MaxTimeZoneLen, is an error of one line.
func Zone(name string) (*time.Location, error) {
	if name == "" {
		name = "UTC"
	}
	if loc, ok := loaded.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if len(name) > model.MaxTimeZoneLen {
		return nil, fmt.Errorf("the time zone's name exceeds %d bytes", model.MaxTimeZoneLen)
	}
	unknown := fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Berlin)", name)
	idx, err := zones()
	if err != nil {
		return nil, fmt.Errorf("the built-in time zone database: %v", err)
	}
	f, ok := idx[name]
	if !ok {
		return nil, unknown
	}
	rc, err := f.Open()
	if err != nil {
		return nil, unknown
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, unknown
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, unknown
	}
	loaded.Store(name, loc)
	return loc, nil
}
