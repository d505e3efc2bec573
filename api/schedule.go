package api

import (
	"net/http"
	"net/url"

	"github.com/drover-project/drover/model"
)

// PathSchedules is POST (create) and GET (list); a schedule's name
// follows for GET, DELETE, and POST of /suspend, /resume and /run.
const PathSchedules = "/v1/schedules"

// QueryAllNamespaces, on GET /v1/schedules, asks for the schedules of
// every namespace the caller may read; it excludes QueryNamespace.
// QuerySchedule, on GET /v1/drivers, keeps the drivers a schedule fired
// (model.Driver.Schedule).
const (
	QueryAllNamespaces = "all_namespaces"
	QuerySchedule      = "schedule"
)

// The schedule endpoints. Creating, suspending, resuming, running and
// deleting need submit access to the schedule's namespace, reading needs
// read access; a namespace token reaches only its namespaces' schedules.
var (
	V1CreateSchedule  = Endpoint[ScheduleRequest, ScheduleStatus]{Route{http.MethodPost, PathSchedules}}
	V1Schedules       = Endpoint[NoBody, ScheduleList]{Route{http.MethodGet, PathSchedules}}
	V1Schedule        = Endpoint[NoBody, ScheduleStatus]{Route{http.MethodGet, PathSchedules + "/{id}"}}
	V1SuspendSchedule = Endpoint[NoBody, ScheduleStatus]{Route{http.MethodPost, PathSchedules + "/{id}/suspend"}}
	V1ResumeSchedule  = Endpoint[NoBody, ScheduleStatus]{Route{http.MethodPost, PathSchedules + "/{id}/resume"}}
	V1RunSchedule     = Endpoint[NoBody, ScheduleRunResponse]{Route{http.MethodPost, PathSchedules + "/{id}/run"}}
	V1DeleteSchedule  = Endpoint[NoBody, *model.Schedule]{Route{http.MethodDelete, PathSchedules + "/{id}"}}
)

// ScheduleRequest is the body of POST /v1/schedules: a schedule that
// submits Template at every slot of Cron read in TimeZone (see
// docs/schedules.md for the semantics, Kubernetes' CronJob and Nomad's
// periodic for the ideas). TimeZone is an IANA name, "" for UTC;
// Concurrency "" for allow; StartingDeadlineMS, in milliseconds, 0 for
// no deadline (negative refused); History the ended runs kept, absent for
// model.DefaultHistory, 1 to model.MaxHistory. Template is a submission
// as POST /v1/drivers takes it, checked as one would be (namespace,
// priority, resources, artifacts, uploads), without a token: each run's
// driver ID comes from its slot. Every refusal is a 400 with one line but
// an unknown namespace (404), a name taken (409 schedule_exists) and the
// cluster's schedules at model.MaxSchedules (429 limit_reached).
type ScheduleRequest struct {
	Name               string            `json:"name"`
	Cron               string            `json:"cron"`
	TimeZone           string            `json:"time_zone,omitempty"`
	Concurrency        model.Concurrency `json:"concurrency,omitempty"`
	StartingDeadlineMS int64             `json:"starting_deadline_ms,omitempty"`
	History            *int              `json:"history,omitempty"`
	Template           SubmitRequest     `json:"template"`
}

// ScheduleRunStatus is one run a schedule keeps (model.ScheduleRun: its
// slot, driver and whether it was manual) with its driver's current State
// and Message; both empty once the driver's row is gone (pruned).
type ScheduleRunStatus struct {
	model.ScheduleRun
	State   model.DriverState `json:"state,omitempty"`
	Message string            `json:"message,omitempty"`
}

// ScheduleStatus is one schedule as the API answers it: its row (the
// settings, the last accounted and fired slots, the fired, missed and
// skipped counts), Next, the next slot in Unix milliseconds (0 when
// suspended or when no slot comes within five years), and its kept runs,
// oldest first, with their drivers' states (Runs replaces the row's).
// Unplaceable, in an answer about one schedule (create, get, suspend,
// resume; lists leave it out), says why each run would wait while ALIVE
// workers exist and none of them could hold the template's driver even
// idle: ReasonUnplaceable, what the driver asks and what the largest
// worker offers, as such a waiting driver's message says. It is empty
// when a worker could hold it or none is ALIVE (a cluster starting).
type ScheduleStatus struct {
	model.Schedule
	Next        int64               `json:"next"`
	Unplaceable string              `json:"unplaceable,omitempty"`
	Runs        []ScheduleRunStatus `json:"runs"`
}

// ScheduleList answers GET /v1/schedules: the schedules by name.
type ScheduleList struct {
	Schedules []ScheduleStatus `json:"schedules"`
}

// ScheduleRunResponse answers POST /v1/schedules/{name}/run (201): the
// manual run's driver and its slot, the leader's clock when it fired.
type ScheduleRunResponse struct {
	DriverID string `json:"driver_id"`
	Slot     int64  `json:"slot"`
}

// ParseNamespaceQuery decodes the query of GET /v1/schedules: namespace
// keeps one namespace's rows, all_namespaces=true (or false) says every
// namespace's explicitly, as no query does. Both at once, or
// all_namespaces other than true or false, is refused. The namespace's
// form is the master's to check.
func ParseNamespaceQuery(v url.Values) (ListQuery, error) {
	q := ListQuery{Namespace: v.Get(QueryNamespace)}
	switch all := v.Get(QueryAllNamespaces); {
	case all != "" && all != "true" && all != "false":
		return q, Errorf(ErrInvalidRequest, "%s=%q: want true or false", QueryAllNamespaces, all)
	case all == "true" && q.Namespace != "":
		return q, Errorf(ErrInvalidRequest, "%s and %s=true exclude each other", QueryNamespace, QueryAllNamespaces)
	}
	return q, nil
}
