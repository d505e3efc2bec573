package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// listFiles returns the regular files under roots, in the order
// filepath.WalkDir visits them (lexical within each root, roots in the
// order given). Both modes count exactly these files.
func listFiles(roots []string) ([]string, error) {
	var files []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// countFiles adds the words of every file to counts.
func countFiles(files []string, counts map[string]int) error {
	for _, f := range files {
		if err := countFile(f, counts); err != nil {
			return err
		}
	}
	return nil
}

// countFile adds the words of one file to counts.
func countFile(path string, counts map[string]int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 {
			counts[word.String()]++
			word.Reset()
		}
	}
	for {
		c, _, err := r.ReadRune()
		if err == io.EOF {
			flush()
			return nil
		}
		if err != nil {
			return err
		}
		if unicode.IsLetter(c) {
			word.WriteRune(unicode.ToLower(c))
		} else {
			flush()
		}
	}
}

// WordCount is one line of the result.
type WordCount struct {
	Word  string
	Count int
}

// Top returns the n most frequent words, most frequent first, ties broken
// by the word's byte order so the output is deterministic.
func Top(counts map[string]int, n int) []WordCount {
	all := make([]WordCount, 0, len(counts))
	for w, c := range counts {
		all = append(all, WordCount{w, c})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Count != all[j].Count {
			return all[i].Count > all[j].Count
		}
		return all[i].Word < all[j].Word
	})
	return all[:min(n, len(all))]
}

// digest is the SHA-256, in hex, of "WORD COUNT\n" for every word in byte
// order: one value that compares two whole results, not just their tops.
// Words are runs of letters, so the space and newline are unambiguous.
func digest(counts map[string]int) string {
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Strings(words)
	h := sha256.New()
	var line []byte
	for _, w := range words {
		line = append(line[:0], w...)
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(counts[w]), 10)
		line = append(line, '\n')
		h.Write(line)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// summary is the stderr line both modes print, so that two runs can be
// compared by their whole result.
func summary(files int, counts map[string]int) string {
	total := 0
	for _, c := range counts {
		total += c
	}
	return fmt.Sprintf("wordcount: %d files, %d distinct words, %d words, digest=%s",
		files, len(counts), total, digest(counts))
}
