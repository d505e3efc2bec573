package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// executorConfig is one executor process.
type executorConfig struct {
	// Driver is the driver's base URL (WORDCOUNT_DRIVER).
	Driver string
	// ID is the executor's ID within its application (DROVER_EXECUTOR_ID).
	ID int
	// Slots is how many shards it counts at once (DROVER_EXECUTOR_CORES).
	Slots int
	// Patience is how long the driver may stay unreachable before the
	// executor concludes the job is over and exits.
	Patience time.Duration
	// HTTP is the client for the driver; its Timeout bounds each call.
	HTTP *http.Client
	Logf func(string, ...any)
}

// errDriverGone means the driver did not answer for the executor's
// patience: it finished, died or was relaunched with a new application.
var errDriverGone = errors.New("driver unreachable")

// maxAnswerBody bounds an answer from the driver: a shard's file list.
const maxAnswerBody = 64 << 20

// runExecutor counts shards until the driver says the job is done, the
// driver is gone, or ctx ends (the executor is being killed). Only a
// refusal from the driver, which means a bug, is an error.
func runExecutor(ctx context.Context, cfg executorConfig) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, max(cfg.Slots, 1))
	for n := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[n] = cfg.slot(ctx, n)
			if errs[n] != nil {
				cancel() // the others would fail the same way
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); errors.As(err, new(*refusal)) {
		return err
	}
	for _, err := range errs {
		if errors.Is(err, errDriverGone) {
			cfg.Logf("executor %d: exiting, %v for over %v", cfg.ID, err, cfg.Patience)
			break
		}
	}
	return nil // done, driver gone, or killed
}

// slot is one task thread: ask, count, report, repeat.
func (cfg *executorConfig) slot(ctx context.Context, n int) error {
	for {
		var task taskResponse
		if err := cfg.call(ctx, "/v1/task", taskRequest{Executor: cfg.ID, Slot: n}, &task); err != nil {
			return err
		}
		if task.Done {
			return nil
		}
		if task.Shard == nil {
			if err := pause(ctx, time.Duration(max(task.WaitMS, 10))*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		res := resultRequest{Executor: cfg.ID, Slot: n, Shard: task.Shard.ID}
		counts := map[string]int{}
		for _, f := range task.Shard.Files {
			if err := ctx.Err(); err != nil {
				return err // being killed: report nothing
			}
			if err := countFile(f, counts); err != nil {
				res.Error = err.Error()
				break
			}
		}
		if res.Error == "" {
			res.setCounts(counts)
		}
		var ack resultResponse
		if err := cfg.call(ctx, "/v1/result", res, &ack); err != nil {
			return err
		}
		if ack.Done {
			return nil
		}
	}
}

// call posts in to the driver and decodes its answer into out. It retries
// connection failures and 5xx answers with back-off until the driver has
// been unreachable for Patience (then errDriverGone); results are merged
// first-wins by shard, so a retried post is harmless.
func (cfg *executorConfig) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(cfg.Patience)
	wait := 50 * time.Millisecond
	for {
		err := cfg.post(ctx, path, body, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var refused *refusal
		if errors.As(err, &refused) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %v", errDriverGone, err)
		}
		if err := pause(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// refusal is a 4xx answer: retrying the same request cannot help.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return fmt.Sprintf("driver refused: %d %s", r.status, r.msg) }

func (cfg *executorConfig) post(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Driver+path, bytes.NewReader(body))
	if err != nil {
		return &refusal{0, err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cfg.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody))
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode >= 500:
		return fmt.Errorf("driver answered %s", resp.Status)
	case resp.StatusCode >= 300:
		return &refusal{resp.StatusCode, string(bytes.TrimSpace(b))}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &refusal{resp.StatusCode, "bad answer: " + err.Error()}
	}
	return nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
