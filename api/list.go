package api

import (
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-project/drover/model"
)

// The query parameters of a list (GET /v1/drivers, GET /v1/apps).
const (
	QueryState  = "state"
	QueryName   = "name"
	QueryWorker = "worker"
	QueryLimit  = "limit"
	QueryCursor = "cursor"
	// QueryNamespace keeps the rows of one namespace; absent keeps every
	// namespace's.
	QueryNamespace = "namespace"
)

// DefaultListLimit is the page size of a paged list whose query gives a
// cursor but no limit.
const DefaultListLimit = 1000

// DefaultMaxListLimit is the default of a master's --max-list-page, the
// largest limit a list takes.
const DefaultMaxListLimit = 10_000

// MaxNameFilter bounds a list's name filter, in bytes: a glob for a name,
// which is at most as long.
const MaxNameFilter = 256

// ListQuery picks and pages the rows of a list, on the master, so that a
// client of a cluster with a million drivers reads only what it asks
// for. A row is kept when its state is one of States (none: any), its
// name matches the glob Name (path.Match syntax; "": any) and it is on
// Worker ("": any): a driver whose current attempt, or last one once it
// ended, is there; an app with an executor there; and it belongs to
// Namespace ("": any namespace; a name that is no namespace, or one since
// deleted, keeps the ended rows that still name it); a driver is kept
// when Schedule fired it ("": any driver, fired or submitted). The rows come
// ordered by ID, which orders them by submission time.
//
// A query with a Limit or a Cursor is paged: its answer is a page
// (DriverPage, AppPage) of at most Limit rows (DefaultListLimit when 0)
// whose IDs sort after Cursor, and names the cursor of the next page. A
// cursor is the ID of the last row of a page, a position in the
// replicated tables rather than in one master's answer, so the next page
// may come from any master, after a failover too, and a row dropped in
// between does not move it. A query with neither is answered whole, as a
// JSON array, the answer of clients that predate paging.
type ListQuery struct {
	States    []string
	Name      string
	Worker    string
	Namespace string
	Schedule  string
	Limit     int
	Cursor    string
}

// Paged reports whether the query asks for a page.
func (q ListQuery) Paged() bool { return q.Limit != 0 || q.Cursor != "" }

// Values is q as the query of a list request.
func (q ListQuery) Values() url.Values {
	v := url.Values{}
	if len(q.States) > 0 {
		v.Set(QueryState, strings.Join(q.States, ","))
	}
	if q.Name != "" {
		v.Set(QueryName, q.Name)
	}
	if q.Worker != "" {
		v.Set(QueryWorker, q.Worker)
	}
	if q.Namespace != "" {
		v.Set(QueryNamespace, q.Namespace)
	}
	if q.Schedule != "" {
		v.Set(QuerySchedule, q.Schedule)
	}
	if q.Limit != 0 {
		v.Set(QueryLimit, strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set(QueryCursor, q.Cursor)
	}
	return v
}

// ParseListQuery decodes a list's query: states as comma lists, in any
// case, given once or repeated, and a limit that is a positive count.
// What the values must be beyond their form (known states, a limit
// within the master's bound, a cursor that is an ID) is the master's to
// check.
func ParseListQuery(v url.Values) (ListQuery, error) {
	q := ListQuery{Name: v.Get(QueryName), Worker: v.Get(QueryWorker), Namespace: v.Get(QueryNamespace), Schedule: v.Get(QuerySchedule), Cursor: v.Get(QueryCursor)}
	for _, list := range v[QueryState] {
		for _, s := range strings.Split(list, ",") {
			if s = strings.ToUpper(strings.TrimSpace(s)); s != "" {
				q.States = append(q.States, s)
			}
		}
	}
	if s := v.Get(QueryLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, Errorf(ErrInvalidRequest, "limit %q must be a count of rows, at least 1", s)
		}
		q.Limit = n
	}
	return q, nil
}

// DriverPage is one page of a paged driver list.
type DriverPage struct {
	Drivers []*model.Driver `json:"drivers"`
	// Next is the cursor of the next page, "" when this page is the
	// last.
	Next string `json:"next,omitempty"`
}

// AppPage is one page of a paged app list.
type AppPage struct {
	Apps []AppStatus `json:"apps"`
	// Next is the cursor of the next page, "" when this page is the last.
	Next string `json:"next,omitempty"`
}

// TooLarge is the error of an answer or body past its bound: what it is,
// the bound in bytes and the setting that holds it, so that the reader
// knows which one to raise.
func TooLarge(what string, limit int64, setting string) error {
	return Errorf(ErrTooLarge, "%s exceeds %d bytes (%s)", what, limit, setting)
}

// boundedReader is a reader that fails once more than n bytes came
// through, instead of stopping at n as io.LimitReader does.
type boundedReader struct {
	r   io.Reader
	n   int64
	err error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n < 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.n+1 {
		p = p[:b.n+1]
	}
	k, err := b.r.Read(p)
	b.n -= int64(k)
	if b.n < 0 {
		return k + int(b.n), b.err
	}
	return k, err
}

// Bounded returns a reader of r that gives its first n bytes and then,
// if r has more, fails with err (TooLarge's, say), so an answer past its
// bound is an error that names it rather than one cut short without a
// word.
func Bounded(r io.Reader, n int64, err error) io.Reader {
	return &boundedReader{r: r, n: n, err: err}
}
