// Package metricstest reads the Prometheus text exposition that masters and
// workers serve at /metrics, for tests.
package metricstest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape is one answer of a /metrics endpoint: its families and the text
// they came from.
type Scrape struct {
	Families
	Text []byte
}

// Get scrapes url with client, sending token as a bearer token when it is
// not empty. Anything but a 200 with a parsable body is an error.
func Get(client *http.Client, url, token string) (*Scrape, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	fams, err := Parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return &Scrape{Families: fams, Text: b}, nil
}

// Parse reads a text exposition.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// Lint checks the text exposition of s the way promtool check metrics
// does, and returns one line per problem.
func (s *Scrape) Lint() ([]string, error) {
	problems, err := promlint.New(bytes.NewReader(s.Text)).Lint()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range problems {
		out = append(out, p.Metric+": "+p.Text)
	}
	return out, nil
}

// Value returns the value of the sample of family name whose labels
// include every pair of labels (name, value, name, value...): a counter's
// or gauge's value, or a histogram's or summary's sample count. ok is false
// when there is no such sample. A family with several matching samples
// gives the first in the order of the exposition.
func (f Families) Value(name string, labels ...string) (v float64, ok bool) {
	fam, found := f[name]
	if !found {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// Show prints family name's samples, one per line, for failure messages.
func (f Families) Show(name string) string {
	fam, ok := f[name]
	if !ok {
		return name + " absent"
	}
	var lines []string
	for _, m := range fam.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		v, _ := Families{name: &dto.MetricFamily{Metric: []*dto.Metric{m}}}.Value(name)
		lines = append(lines, fmt.Sprintf("%s{%s} %g", name, strings.Join(ls, ","), v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
