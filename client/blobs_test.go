package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
)

const blobSum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func noBlob(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte(`{"error":"no upload ` + blobSum + `","code":"unknown_blob"}`))
}

// The file is read from the one master that holds it, past a master that
// does not and one that cannot be reached, with the client's token.
func TestOpenBlobAsksEachMasterUntilOneHasIt(t *testing.T) {
	var asked atomic.Int32
	missing := server(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		noBlob(w, r)
	})
	holder := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != api.BlobPath(blobSum) {
			t.Errorf("asked %s %s", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer tok" {
			t.Errorf("Authorization = %q", got)
		}
		w.Write([]byte("test"))
	})
	c := newClient(t, Options{Token: "tok"}, missing, "127.0.0.1:1", holder)
	body, err := c.OpenBlob(context.Background(), blobSum)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(body)
	body.Close()
	if err != nil || string(b) != "test" {
		t.Fatalf("read %q, %v", b, err)
	}
	// The master that had it is asked first next time.
	if body, err = c.OpenBlob(context.Background(), blobSum); err != nil {
		t.Fatal(err)
	}
	body.Close()
	if n := asked.Load(); n != 1 {
		t.Fatalf("the master without the file was asked %d times, want once", n)
	}
}

func TestOpenBlobErrors(t *testing.T) {
	forbidden := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":"needs read access","code":"forbidden"}`))
	}
	for _, c := range []struct {
		name    string
		masters []http.HandlerFunc
		down    bool // one more master that cannot be reached
		want    error
	}{
		{"every master lacks it", []http.HandlerFunc{noBlob, noBlob}, false, api.ErrUnknownBlob},
		{"one master lacks it, one is down", []http.HandlerFunc{noBlob}, true, ErrNoMaster},
		{"one master lacks it, one has no leader", []http.HandlerFunc{noBlob, unavailable}, false, ErrNoMaster},
		{"a refusal ends the search", []http.HandlerFunc{forbidden, func(w http.ResponseWriter, r *http.Request) {
			t.Error("asked the next master after a refusal")
		}}, false, api.ErrForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			var addrs []string
			for _, h := range c.masters {
				addrs = append(addrs, server(t, h))
			}
			if c.down {
				addrs = append(addrs, "127.0.0.1:1")
			}
			cl := newClient(t, Options{}, addrs...)
			body, err := cl.OpenBlob(context.Background(), blobSum)
			if err == nil {
				body.Close()
				t.Fatal("opened a blob no master holds")
			}
			if !errors.Is(err, c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %q, want one line wrapping %v", err, c.want)
			}
		})
	}
}

// A master that does not answer is given RequestTimeout, then the next one
// is asked; a slow body is not cut off by that bound.
func TestOpenBlobPassesOverSilentMaster(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	silent := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	slow := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("te"))
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond)
		w.Write([]byte("st"))
	})
	c := newClient(t, Options{RequestTimeout: 200 * time.Millisecond}, silent, slow)
	body, err := c.OpenBlob(context.Background(), blobSum)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if b, err := io.ReadAll(body); err != nil || string(b) != "test" {
		t.Fatalf("read %q, %v", b, err)
	}
}
