package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// parseSizeMB parses a memory size as Spark writes them ("512m", "4g",
// "1024k", "2t"; a bare number is MiB) into MiB. Sizes below 1 MiB, negative
// or malformed sizes are errors.
func parseSizeMB(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	if t == "" {
		return 0, fmt.Errorf("size %q is empty", s)
	}
	mult := map[byte]float64{'k': 1.0 / 1024, 'm': 1, 'g': 1024, 't': 1024 * 1024}
	f := 1.0
	if m, ok := mult[t[len(t)-1]]; ok {
		f = m
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || !(n >= 0 && n < 1e12) { // also refuses NaN and Inf
		return 0, fmt.Errorf("size %q is not a size like 512m or 4g", s)
	}
	mb := int64(n * f)
	if mb < 1 {
		return 0, fmt.Errorf("size %q is below 1 MiB", s)
	}
	return mb, nil
}

// sizeFlag is a pflag.Value holding a size in MiB.
type sizeFlag struct{ mb int64 }

func (s *sizeFlag) String() string {
	switch {
	case s.mb == 0:
		return "0"
	case s.mb%1024 == 0:
		return fmt.Sprintf("%dg", s.mb/1024)
	}
	return fmt.Sprintf("%dm", s.mb)
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

var _ pflag.Value = (*sizeFlag)(nil)
