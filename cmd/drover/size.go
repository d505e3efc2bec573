package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// maxSize bounds every size a flag takes, in bytes: 1 EiB (1048576t),
// well inside an int64.
const maxSize = 1 << 60

// errTooLarge is wrapped by the error of a size past its bound.
var errTooLarge = errors.New("too large")

// parseSize parses a size as Spark writes them ("512m", "4g", "64k", "2t";
// a bare number is MiB) into bytes. Negative or malformed sizes are
// errors; one past maxSize is an error wrapping errTooLarge.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	if t == "" {
		return 0, fmt.Errorf("size %q is empty", s)
	}
	mult := map[byte]float64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40}
	f := float64(1 << 20)
	if m, ok := mult[t[len(t)-1]]; ok {
		f = m
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseFloat(t, 64)
	// A number too large for a float64 is a size still, and too large.
	if errors.Is(err, strconv.ErrRange) && n > 0 || err == nil && n*f > maxSize && !math.IsInf(n, 1) {
		return 0, fmt.Errorf("size %q is %w: at most %s", s, errTooLarge, formatSize(maxSize))
	}
	if err != nil || !(n >= 0) || math.IsInf(n, 1) { // also refuses NaN
		return 0, fmt.Errorf("size %q is not a size like 512m or 4g", s)
	}
	return int64(n * f), nil
}

// parseSizeMB is parseSize in MiB, for memory. Sizes below 1 MiB are
// errors.
func parseSizeMB(s string) (int64, error) {
	b, err := parseSize(s)
	if err != nil {
		return 0, err
	}
	if b < 1<<20 {
		return 0, fmt.Errorf("size %q is below 1 MiB", s)
	}
	return b >> 20, nil
}

// formatSize writes b bytes the way parseSize reads them, in the largest
// unit that divides it.
func formatSize(b int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"t", 40}, {"g", 30}, {"m", 20}, {"k", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatFloat(float64(b)/(1<<10), 'f', -1, 64) + "k"
}

// sizeFlag is a pflag.Value holding a size in MiB, at most max MiB when
// max is not 0.
type sizeFlag struct{ mb, max int64 }

func (s *sizeFlag) String() string {
	if s.mb == 0 {
		return "0"
	}
	return formatSize(s.mb << 20)
}

func (s *sizeFlag) Set(v string) error {
	mb, err := parseSizeMB(v)
	if s.max > 0 && (errors.Is(err, errTooLarge) || err == nil && mb > s.max) {
		return fmt.Errorf("size %q is too large: at most %dm", v, s.max)
	}
	if err != nil {
		return err
	}
	s.mb = mb
	return nil
}

func (s *sizeFlag) Type() string { return "size" }

// bytesFlag is a pflag.Value holding a size in bytes, at least min.
type bytesFlag struct{ b, min int64 }

func (s *bytesFlag) String() string {
	if s.b == 0 {
		return "0"
	}
	return formatSize(s.b)
}

func (s *bytesFlag) Set(v string) error {
	b, err := parseSize(v)
	if err != nil {
		return err
	}
	if b < s.min {
		return fmt.Errorf("size %q is below %s", v, formatSize(s.min))
	}
	s.b = b
	return nil
}

func (s *bytesFlag) Type() string { return "size" }

var (
	_ pflag.Value = (*sizeFlag)(nil)
	_ pflag.Value = (*bytesFlag)(nil)
)
