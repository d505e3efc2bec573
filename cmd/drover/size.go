package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// parseSize parses a size as Spark writes them ("512m", "4g", "64k", "2t";
// a bare number is MiB) into bytes. Negative or malformed sizes are
// errors.
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
	if err != nil || !(n >= 0 && n < 1e12) { // also refuses NaN and Inf
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

// sizeFlag is a pflag.Value holding a size in MiB.
type sizeFlag struct{ mb int64 }

func (s *sizeFlag) String() string {
	if s.mb == 0 {
		return "0"
	}
	return formatSize(s.mb << 20)
}

func (s *sizeFlag) Set(v string) error {
	mb, err := parseSizeMB(v)
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
