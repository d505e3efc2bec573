// Package masterjson maps a master's view of the cluster (api.State) to the
// JSON document a Spark standalone master serves at /json (Spark's
// MasterPage.renderJson, written by JsonProtocol.writeMasterState), so
// that dashboards and scripts written for a Spark master read a Drover
// master as they read Spark's: the same field names, types and units
// (cores, memory in MB, times in Unix milliseconds, dates as Java's
// Date.toString writes them, in UTC).
//
//	GET /json                      Master
//	GET /json/FIELD                {"FIELD": the value of that field of Master}
//	GET /json/clusterutilization   ClusterUtilization
//
// Where Drover has no counterpart of Spark's, the field holds what Spark
// writes when it has nothing: custom resources (GPUs), which Drover does
// not place yet, are empty objects and lists. An app's user is the user
// its executors run as, as Spark's is its submitter, who its executors
// run as under YARN; "" when each worker's default is.
package masterjson

import (
	"encoding/json"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// Master is Spark's MasterStateResponse as writeMasterState writes it.
// Cores and memory (MB) count ALIVE workers only, as Spark's do.
type Master struct {
	// URL is the master's address for Spark tools (Site.URL).
	URL          string   `json:"url"`
	Workers      []Worker `json:"workers"`
	AliveWorkers int      `json:"aliveworkers"`
	Cores        int      `json:"cores"`
	CoresUsed    int      `json:"coresused"`
	Memory       int64    `json:"memory"`
	MemoryUsed   int64    `json:"memoryused"`
	// Resources and ResourcesUsed hold one object per ALIVE worker: its
	// custom resources by name, none in Drover.
	Resources     []map[string]any `json:"resources"`
	ResourcesUsed []map[string]any `json:"resourcesused"`
	// ActiveApps and ActiveDrivers are those that have not ended;
	// CompletedApps and CompletedDrivers those that have, as long as the
	// masters retain them (--retained-apps, --retained-drivers).
	ActiveApps       []App    `json:"activeapps"`
	CompletedApps    []App    `json:"completedapps"`
	ActiveDrivers    []Driver `json:"activedrivers"`
	CompletedDrivers []Driver `json:"completeddrivers"`
	// Status is Spark's RecoveryState: ALIVE on the leader, STANDBY on
	// every other master (whose view may lag the leader's).
	Status string `json:"status"`
}

// Worker is Spark's WorkerInfo as writeWorkerInfo writes it. Host and Port
// are the worker's HTTP address, and WebUIAddress its URL: Drover's workers
// have no other listener. LastHeartbeat is the last change of the
// worker's row (registration, loss, decommissioning), in Unix
// milliseconds: heartbeats themselves are not replicated.
type Worker struct {
	ID            string         `json:"id"`
	Host          string         `json:"host"`
	Port          int            `json:"port"`
	WebUIAddress  string         `json:"webuiaddress"`
	Cores         int            `json:"cores"`
	CoresUsed     int            `json:"coresused"`
	CoresFree     int            `json:"coresfree"`
	Memory        int64          `json:"memory"`
	MemoryUsed    int64          `json:"memoryused"`
	MemoryFree    int64          `json:"memoryfree"`
	Resources     map[string]any `json:"resources"`
	ResourcesUsed map[string]any `json:"resourcesused"`
	ResourcesFree map[string]any `json:"resourcesfree"`
	State         string         `json:"state"`
	LastHeartbeat int64          `json:"lastheartbeat"`
}

// App is Spark's ApplicationInfo as writeApplicationInfo writes it: Cores
// are those granted, memory is per executor (also under Spark's deprecated
// "slave" names), StartTime the registration in Unix milliseconds, and
// Duration runs from it to the app's end, or to now.
type App struct {
	ID                   string `json:"id"`
	StartTime            int64  `json:"starttime"`
	Name                 string `json:"name"`
	Cores                int    `json:"cores"`
	User                 string `json:"user"`
	MemoryPerExecutor    int64  `json:"memoryperexecutor"`
	MemoryPerSlave       int64  `json:"memoryperslave"`
	ResourcesPerExecutor []any  `json:"resourcesperexecutor"`
	ResourcesPerSlave    []any  `json:"resourcesperslave"`
	SubmitDate           string `json:"submitdate"`
	State                string `json:"state"`
	Duration             int64  `json:"duration"`
}

// Driver is Spark's DriverInfo as writeDriverInfo writes it: StartTime is
// the submission's Unix milliseconds written as a string (Spark writes
// startTime.toString), Worker the worker of its current attempt, or of
// its last for one that ended, and "None" while it waits for one, and
// MainClass what the driver runs as: its name,
// else its program (Drover runs an argv, not a class).
type Driver struct {
	ID         string         `json:"id"`
	StartTime  string         `json:"starttime"`
	State      string         `json:"state"`
	Cores      int            `json:"cores"`
	Memory     int64          `json:"memory"`
	Resources  map[string]any `json:"resources"`
	SubmitDate string         `json:"submitdate"`
	Worker     string         `json:"worker"`
	MainClass  string         `json:"mainclass"`
}

// ClusterUtilization is what Spark's writeClusterUtilization writes for
// /json/clusterutilization: the ALIVE workers' cores and memory (MB), in
// use and in all, and whole percentages of use (100 when there is none),
// with the drivers waiting for a worker.
type ClusterUtilization struct {
	WaitingDrivers    int   `json:"waitingDrivers"`
	Cores             int   `json:"cores"`
	CoresUsed         int   `json:"coresused"`
	CoresUtilization  int   `json:"coresutilization"`
	Memory            int64 `json:"memory"`
	MemoryUsed        int64 `json:"memoryused"`
	MemoryUtilization int64 `json:"memoryutilization"`
}

// Site is what a document says about the master that serves it.
type Site struct {
	// URL is the master's address as Spark tools name one: spark://HOST:PORT
	// of its Spark REST listener (where spark-submit --master goes), or its
	// API's URL when it serves none.
	URL string
	// Scheme is every node's HTTP scheme, http or https.
	Scheme string
}

// Render is the answer to /json (field "") or /json/FIELD, made from st
// at now. A field Spark's master does not serve is refused with an error
// wrapping api.ErrNotFound that names those it does; Spark answers such a
// field with {"FIELD": ""}, which hides a typo.
func (s Site) Render(st *api.State, now time.Time, field string) (any, error) {
	switch field {
	case "":
		return s.master(st, now), nil
	case "clusterutilization":
		return utilization(st), nil
	}
	b, err := json.Marshal(s.master(st, now))
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	v, ok := fields[field]
	if !ok {
		names := slices.Sorted(maps.Keys(fields))
		return nil, api.Errorf(api.ErrNotFound, "/json has no field %q; it has %s and clusterutilization", field, strings.Join(names, ", "))
	}
	return map[string]json.RawMessage{field: v}, nil
}

// master maps st to Spark's master state.
func (s Site) master(st *api.State, now time.Time) Master {
	m := Master{URL: s.URL, Status: "STANDBY",
		Workers: []Worker{}, Resources: []map[string]any{}, ResourcesUsed: []map[string]any{},
		ActiveApps: []App{}, CompletedApps: []App{}, ActiveDrivers: []Driver{}, CompletedDrivers: []Driver{}}
	// Role carries raft.RaftState's name.
	if st.Role == "Leader" {
		m.Status = "ALIVE"
	}
	for _, w := range st.Workers {
		m.Workers = append(m.Workers, s.worker(w))
		if w.State == model.WorkerAlive {
			m.AliveWorkers++
			m.Resources, m.ResourcesUsed = append(m.Resources, map[string]any{}), append(m.ResourcesUsed, map[string]any{})
		}
	}
	m.Cores, m.CoresUsed, m.Memory, m.MemoryUsed = aliveTotals(st.Workers)
	for _, a := range st.Apps {
		if a.State.Terminal() {
			m.CompletedApps = append(m.CompletedApps, app(a.App, now))
		} else {
			m.ActiveApps = append(m.ActiveApps, app(a.App, now))
		}
	}
	for _, d := range st.Drivers {
		if d.State.Terminal() {
			m.CompletedDrivers = append(m.CompletedDrivers, driver(d))
		} else {
			m.ActiveDrivers = append(m.ActiveDrivers, driver(d))
		}
	}
	return m
}

func (s Site) worker(w *model.Worker) Worker {
	host, portStr, _ := net.SplitHostPort(w.HTTPAddr)
	port, _ := strconv.Atoi(portStr)
	return Worker{
		ID: w.ID, Host: host, Port: port, WebUIAddress: s.Scheme + "://" + w.HTTPAddr,
		Cores: w.Cores, CoresUsed: w.CoresUsed, CoresFree: w.CoresFree(),
		Memory: w.MemoryMB, MemoryUsed: w.MemoryUsedMB, MemoryFree: w.MemoryFreeMB(),
		Resources: map[string]any{}, ResourcesUsed: map[string]any{}, ResourcesFree: map[string]any{},
		State: string(w.State), LastHeartbeat: w.UpdatedAt,
	}
}

func app(a *model.App, now time.Time) App {
	end := now.UnixMilli()
	if a.State.Terminal() && a.EndedAt != 0 {
		end = a.EndedAt
	}
	return App{
		ID: a.ID, StartTime: a.SubmittedAt, Name: a.Name, Cores: a.CoresGranted, User: a.User,
		MemoryPerExecutor: a.MemoryPerExecutorMB, MemoryPerSlave: a.MemoryPerExecutorMB,
		ResourcesPerExecutor: []any{}, ResourcesPerSlave: []any{},
		SubmitDate: javaDate(a.SubmittedAt), State: string(a.State), Duration: max(end-a.SubmittedAt, 0),
	}
}

func driver(d *model.Driver) Driver {
	out := Driver{
		ID: d.ID, StartTime: strconv.FormatInt(d.SubmittedAt, 10), State: string(d.State),
		Cores: d.Cores, Memory: d.MemoryMB, Resources: map[string]any{},
		SubmitDate: javaDate(d.SubmittedAt), Worker: d.WorkerID, MainClass: d.Name,
	}
	if out.Worker == "" {
		out.Worker = "None"
	}
	if out.MainClass == "" && len(d.Argv) > 0 {
		out.MainClass = d.Argv[0]
	}
	return out
}

// utilization is Spark's cluster utilization of st. Waiting drivers are
// those in the waiting queue: submitted or relaunching, and not placed.
func utilization(st *api.State) ClusterUtilization {
	u := ClusterUtilization{WaitingDrivers: len(st.WaitingDrivers), CoresUtilization: 100, MemoryUtilization: 100}
	u.Cores, u.CoresUsed, u.Memory, u.MemoryUsed = aliveTotals(st.Workers)
	if u.Cores > 0 {
		u.CoresUtilization = 100 * u.CoresUsed / u.Cores
	}
	if u.Memory > 0 {
		u.MemoryUtilization = 100 * u.MemoryUsed / u.Memory
	}
	return u
}

// aliveTotals sums the cores and memory (MiB), in all and in use, of the
// ALIVE workers.
func aliveTotals(ws []*model.Worker) (cores, coresUsed int, memory, memoryUsed int64) {
	for _, w := range ws {
		if w.State == model.WorkerAlive {
			cores, coresUsed = cores+w.Cores, coresUsed+w.CoresUsed
			memory, memoryUsed = memory+w.MemoryMB, memoryUsed+w.MemoryUsedMB
		}
	}
	return cores, coresUsed, memory, memoryUsed
}

// javaDate writes Unix milliseconds as Java's Date.toString does ("Thu Jan
// 01 00:00:00 UTC 2026"), in UTC.
func javaDate(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("Mon Jan 02 15:04:05 MST 2006")
}
