// Package metrics scrapes a Prometheus text endpoint (an etcd server's, a
// walctl daemon's) for tests that measure what an operation cost.
package metrics

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Metrics maps each series ("name{labels}") to its value.
type Metrics map[string]float64

// Scrape reads every series from url.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	m := Metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("scrape %s: metrics line %q has no value", url, line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: metrics line %q: %v", url, line, err)
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}

// Sum adds the series of name whose labels contain every one of labels
// (`key="value"`; empty ones match anything). It is an error when there is
// none, so that a renamed metric cannot make an assertion vacuous.
func (m Metrics) Sum(name string, labels ...string) (float64, error) {
	total, found := 0.0, false
next:
	for series, v := range m {
		if series != name && !strings.HasPrefix(series, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(series, l) {
				continue next
			}
		}
		total, found = total+v, true
	}
	if !found {
		return 0, fmt.Errorf("no series %s%v", name, labels)
	}
	return total, nil
}

// MustScrape is Scrape failing the test on an error.
func MustScrape(t testing.TB, url string) Metrics {
	t.Helper()
	m, err := Scrape(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// MustSum is Sum failing the test when no series matches.
func (m Metrics) MustSum(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	v, err := m.Sum(name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
