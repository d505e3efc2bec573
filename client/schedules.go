package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport"
)

// scheduleCalls are the client's schedule calls, a type of their own
// embedded in Client (whose methods they are) so that Client's own
// methods stay few.
type scheduleCalls struct{ c *Client }

// CreateSchedule creates the schedule req describes (submit access to its
// template's namespace) and returns it as the leader then holds it, with
// its next slot. It is sent once (callOnce): a name taken is an
// *APIError wrapping model.ErrScheduleExists, which a copy would get.
func (sc scheduleCalls) CreateSchedule(ctx context.Context, req api.ScheduleRequest) (api.ScheduleStatus, error) {
	var out api.ScheduleStatus
	return out, callOnce(ctx, sc.c, api.V1CreateSchedule, api.V1CreateSchedule.Pattern, req, &out)
}

// Schedules returns the schedules of namespace ("" for every namespace
// the caller may read), by name, with their next slots and runs; all asks
// for every namespace explicitly and excludes namespace.
func (sc scheduleCalls) Schedules(ctx context.Context, namespace string, all bool) (api.ScheduleList, error) {
	var out api.ScheduleList
	v := url.Values{}
	if namespace != "" {
		v.Set(api.QueryNamespace, namespace)
	}
	if all {
		v.Set(api.QueryAllNamespaces, "true")
	}
	p := api.V1Schedules.Pattern
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	return out, call(ctx, sc.c, api.V1Schedules, p, api.NoBody{}, &out)
}

// Schedule returns schedule name with its next slot and runs. An unknown
// name is an *APIError wrapping model.ErrUnknownSchedule; a name that is
// no schedule's (model.CheckScheduleName) is refused before any request,
// wrapping api.ErrInvalidRequest.
func (sc scheduleCalls) Schedule(ctx context.Context, name string) (api.ScheduleStatus, error) {
	return sc.scheduleCall(ctx, api.V1Schedule, name, false)
}

// SuspendSchedule suspends schedule name: none of its slots fires until
// ResumeSchedule. Suspending a suspended schedule changes nothing; the
// request still goes to one master at a time (callOnce), so that one
// suspension is one entry and one event, not one per master.
func (sc scheduleCalls) SuspendSchedule(ctx context.Context, name string) (api.ScheduleStatus, error) {
	return sc.scheduleCall(ctx, api.V1SuspendSchedule, name, true)
}

// ResumeSchedule resumes schedule name: the slots it passed while
// suspended are counted missed but the latest, which fires if within the
// starting deadline. It is sent as SuspendSchedule is.
func (sc scheduleCalls) ResumeSchedule(ctx context.Context, name string) (api.ScheduleStatus, error) {
	return sc.scheduleCall(ctx, api.V1ResumeSchedule, name, true)
}

// RunSchedule starts one run of schedule name now, its slot the leader's
// clock, and returns its driver's ID. It is sent once (callOnce): a copy
// would start a second run. A forbid schedule with a run not ended,
// or a submission the namespace refuses, is an *APIError of status 409.
func (sc scheduleCalls) RunSchedule(ctx context.Context, name string) (string, error) {
	var out api.ScheduleRunResponse
	p, err := schedulePath(api.V1RunSchedule.Route, name)
	if err != nil {
		return "", err
	}
	return out.DriverID, callOnce(ctx, sc.c, api.V1RunSchedule, p, api.NoBody{}, &out)
}

// DeleteSchedule deletes schedule name and returns the row it had; its
// runs that have not ended go on. It is sent once (callOnce): a copy
// would find the schedule gone.
func (sc scheduleCalls) DeleteSchedule(ctx context.Context, name string) (*model.Schedule, error) {
	var out *model.Schedule
	p, err := schedulePath(api.V1DeleteSchedule.Route, name)
	if err != nil {
		return nil, err
	}
	return out, callOnce(ctx, sc.c, api.V1DeleteSchedule, p, api.NoBody{}, &out)
}

// scheduleCall calls e, an endpoint of schedule name that takes no body
// and answers its status: through callOnce when once, else as any read.
func (sc scheduleCalls) scheduleCall(ctx context.Context, e api.Endpoint[api.NoBody, api.ScheduleStatus], name string, once bool) (api.ScheduleStatus, error) {
	var out api.ScheduleStatus
	p, err := schedulePath(e.Route, name)
	if err != nil {
		return out, err
	}
	if once {
		return out, callOnce(ctx, sc.c, e, p, api.NoBody{}, &out)
	}
	return out, call(ctx, sc.c, e, p, api.NoBody{}, &out)
}

// schedulePath is route's path naming schedule name, once name is a
// schedule's (model.CheckScheduleName).
func schedulePath(route api.Route, name string) (string, error) {
	if err := model.CheckScheduleName(name); err != nil {
		return "", api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	return route.Path(name), nil
}

// ErrOutcomeUnknown is wrapped by the failure of a write sent once
// (callOnce) that may have been carried out: the answer was lost, or a
// master could not tell whether the leader committed it (a connection
// to the leader broken mid-request, a commit not confirmed). Reading the
// row tells.
var ErrOutcomeUnknown = errors.New("the masters may or may not have carried it out; read it back to know")

// callOnce is call for a write whose copies would not answer alike (a
// create, a manual run, a delete), without the operator access
// callLeader needs to find the leader: it goes to one master at a time,
// the one an answer named leader first, and on to the next only while
// what it knows says no earlier one acted on the request: the master
// refused the connection (transport.Refused), or answered that it
// refused before any work because no leader was ready
// (api.ErrNoLeader). When every master has said one or the other and
// one of them was waiting for a leader, as in an election, the round is
// tried again after a back-off (Options.RetryInterval doubling to
// MaxRetryInterval) until ctx ends, which is ErrNoMaster; it wraps
// ErrOutcomeUnknown too when ctx ended while a master that had not said
// it did nothing held the request. A refusal (*APIError) is returned as
// it is; any other failure wraps ErrOutcomeUnknown: the request may have
// been committed.
func callOnce[In, Out any](ctx context.Context, c *Client, e api.Endpoint[In, Out], path string, in In, out *Out) error {
	var body []byte
	if _, none := any(in).(api.NoBody); !none {
		var err error
		if body, err = api.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	wait := c.opts.RetryInterval
	for {
		masters := c.masters
		if p := c.preferredMaster(); p != "" {
			masters = append([]string{p}, slices.DeleteFunc(slices.Clone(masters), func(m string) bool { return m == p })...)
		}
		var reasons []string
		electing := false
		for _, m := range masters {
			resp, err := c.one(ctx, m, e.Method, path, body, nil, 0)
			switch {
			case err == nil:
				return decodeJSON(resp, out)
			case ctx.Err() != nil:
				// Unless m said it did nothing, the request may be in
				// m's hands: a hung master may commit it yet.
				why := strings.Join(append(reasons, err.Error()), "; ")
				if errors.Is(err, api.ErrNoLeader) {
					return fmt.Errorf("%w: %s", ErrNoMaster, why)
				}
				return fmt.Errorf("%w: %w: %s", ErrNoMaster, ErrOutcomeUnknown, why)
			case errors.Is(err, api.ErrNoLeader):
				electing = true
			case isAPIError(err):
				return err
			case !transport.Refused(c.opts.BindIP, m, c.opts.RequestTimeout):
				return fmt.Errorf("%w: %w", err, ErrOutcomeUnknown)
			}
			reasons = append(reasons, err.Error())
		}
		if !electing {
			return fmt.Errorf("%w: %s", ErrNoMaster, strings.Join(reasons, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ErrNoMaster, strings.Join(reasons, "; "))
		case <-time.After(wait):
		}
		wait = min(2*wait, c.opts.MaxRetryInterval)
	}
}
