package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport"
)

// maxWorkerError bounds the error answer of a worker that is read.
const maxWorkerError = 64 << 10

// logUnit is the unit a log request names, as the tables know it.
type logUnit struct {
	// what names it for people: "attempt 2 of driver-...".
	what string
	// workerID is the worker it was placed on, which keeps its files.
	workerID string
	// path is the log's path, the same on the worker as on a master.
	path string
	// ended says the unit has reached a final state.
	ended bool
}

// workerLog asks u's worker for its log with query q. The worker is called
// with this master's credential, never the caller's: the caller's token is
// for the masters, and a worker knows masters by their certificate, or
// without TLS by the node token (Config.WorkerToken). With TLS the answer
// counts only from the worker meant: its certificate must name it
// (checkWorkerCert). The log of a worker the masters no longer know, or
// that is not ALIVE and does not answer, and that of an ended unit whose
// directory its worker removed, is api.ErrGone, said in one line; a worker
// ALIVE that does not answer, or answers with another's certificate, is
// api.ErrBadGateway.
func (s *Core) workerLog(ctx context.Context, u logUnit, q LogQuery) (*Log, error) {
	switch q.Stream {
	case "", api.StreamStdout, api.StreamStderr:
	default:
		return nil, api.Errorf(api.ErrInvalidRequest, "stream %q must be stdout or stderr", q.Stream)
	}
	if q.Offset < 0 {
		return nil, api.Errorf(api.ErrInvalidRequest, "offset %d must be a byte count", q.Offset)
	}
	wk, ok := s.FSM.State().Worker(u.workerID)
	if !ok {
		return nil, api.Errorf(api.ErrGone, "%s ran on worker %s, which the masters no longer know: its logs went with it", u.what, u.workerID)
	}
	target := url.URL{Scheme: s.cfg.Scheme, Host: wk.HTTPAddr, Path: u.path, RawQuery: q.Values().Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil, err
	}
	if s.cfg.Scheme == "http" && s.cfg.WorkerToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.WorkerToken)
	}
	resp, err := s.Workers.Do(req)
	if err != nil {
		cause := transport.RootCause(err)
		if wk.State != model.WorkerAlive {
			return nil, api.Errorf(api.ErrGone, "%s ran on worker %s, which is %s and does not answer (%v): its logs are out of reach unless it comes back",
				u.what, wk.ID, wk.State, cause)
		}
		return nil, api.Errorf(api.ErrBadGateway, "worker %s at %s, which keeps the logs of %s, does not answer: %v", wk.ID, wk.HTTPAddr, u.what, cause)
	}
	if err := s.checkWorkerCert(resp, wk); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound && u.ended {
			return nil, api.Errorf(api.ErrGone, "%s is no longer on worker %s: its directory was removed (a worker keeps a finished unit's files for its --cleanup-ttl, less when its disk runs low)",
				u.what, wk.ID)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxWorkerError))
		var e api.Error
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = resp.Status
		}
		e.Error = fmt.Sprintf("worker %s: %s", wk.ID, e.Error)
		return nil, e.Err(resp.StatusCode)
	}
	l := &Log{Body: resp.Body}
	l.Start, l.Size = api.LogHeaders(resp.Header, q.Offset)
	return l, nil
}

// checkWorkerCert refuses, with api.ErrBadGateway, an answer over TLS from
// a worker whose certificate names another worker than wk, or, unless
// Config.AllowUnboundWorkerCerts, none: whoever holds an address the
// tables give for wk must not serve wk's logs. The request went out
// before the check, since which worker answers is known only once it has;
// it carries no secret over TLS, where this master's certificate is its
// credential.
func (s *Core) checkWorkerCert(resp *http.Response, wk *model.Worker) error {
	if resp.TLS == nil {
		return nil
	}
	id, err := pki.PeerID(resp.TLS)
	switch {
	case err != nil:
		return api.Errorf(api.ErrBadGateway, "worker %s at %s: %v", wk.ID, wk.HTTPAddr, err)
	case id == "" && !s.cfg.AllowUnboundWorkerCerts:
		return api.Errorf(api.ErrBadGateway, "worker %s at %s answers with a certificate that names no worker: reissue it with drover tls cert --role worker --name %s", wk.ID, wk.HTTPAddr, wk.ID)
	case id != "" && id != wk.ID:
		return api.Errorf(api.ErrBadGateway, "the worker at %s answers with the certificate of %s, not %s's: its answer is not taken", wk.HTTPAddr, id, wk.ID)
	}
	return nil
}
