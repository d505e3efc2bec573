package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport"
)

// maxWorkerError bounds the error answer of a worker that is read.
const maxWorkerError = 64 << 10

// workerLog asks the worker workerID for the log at path (the same path on
// the worker as on a master) with query q; what names the driver or
// executor in errors. The worker is called with this master's credential,
// never the caller's: the caller's token is for the masters, and a worker
// knows masters by their certificate, or without TLS by the operator
// token.
func (s *Core) workerLog(ctx context.Context, workerID, path string, q LogQuery, what string) (*Log, error) {
	switch q.Stream {
	case "", api.StreamStdout, api.StreamStderr:
	default:
		return nil, api.Errorf(api.ErrInvalidRequest, "stream %q must be stdout or stderr", q.Stream)
	}
	if q.Offset < 0 {
		return nil, api.Errorf(api.ErrInvalidRequest, "offset %d must be a byte count", q.Offset)
	}
	wk, ok := s.FSM.Worker(workerID)
	if !ok {
		return nil, api.Errorf(model.ErrUnknownWorker, "worker %s of %s is unknown", workerID, what)
	}
	u := url.URL{Scheme: s.cfg.Scheme, Host: wk.HTTPAddr, Path: path, RawQuery: q.Values().Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if s.cfg.Scheme == "http" && s.cfg.OperatorToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.OperatorToken)
	}
	resp, err := s.Workers.Do(req)
	if err != nil {
		return nil, api.Errorf(api.ErrBadGateway, "worker %s at %s: %v", wk.ID, wk.HTTPAddr, transport.RootCause(err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxWorkerError))
		var e api.Error
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = resp.Status
		}
		e.Error = fmt.Sprintf("worker %s: %s", wk.ID, e.Error)
		return nil, e.Err(resp.StatusCode)
	}
	size, _ := strconv.ParseInt(resp.Header.Get(api.HeaderLogSize), 10, 64)
	return &Log{Size: size, Body: resp.Body}, nil
}
