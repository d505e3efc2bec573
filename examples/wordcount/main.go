// Command wordcount counts the words in every regular file under the given
// directories and prints the most frequent ones, "COUNT WORD" per line,
// most frequent first (ties in byte order of the word). A word is a maximal
// run of Unicode letters, lower-cased. It is Drover's example driver: real
// work on real input, with a result that is easy to check.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
)

func main() {
	top := flag.Int("top", 20, "how many words to print")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: wordcount [--top N] DIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *top < 1 {
		flag.Usage()
		os.Exit(2)
	}
	counts := map[string]int{}
	files := 0
	for _, root := range flag.Args() {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			files++
			return countFile(path, counts)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "wordcount:", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "wordcount: %d files, %d distinct words\n", files, len(counts))
	for _, wc := range Top(counts, *top) {
		fmt.Printf("%d %s\n", wc.Count, wc.Word)
	}
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
