package master

import (
	"html/template"
	"net/http"
	"time"
)

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms": func(v int64) string {
		if v == 0 {
			return ""
		}
		return time.UnixMilli(v).UTC().Format("2006-01-02 15:04:05")
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>Drover master {{.ID}}</title>
<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#eee}</style></head>
<body>
<h1>Drover master {{.ID}}</h1>
<p>Role: <b>{{.Role}}</b> · term {{.Term}} · commit index {{.CommitIndex}} · applied index {{.AppliedIndex}} ·
leader: {{if .LeaderHTTP}}<a href="http://{{.LeaderHTTP}}/">{{.Leader}}</a>{{else}}{{if .Leader}}{{.Leader}}{{else}}none known{{end}}{{end}}</p>
<h2>Masters</h2>
<table><tr><th>ID</th><th>Raft address</th><th>HTTP</th><th>Suffrage</th><th>Leader</th></tr>
{{range .Masters}}<tr><td>{{.ID}}</td><td>{{.RaftAddr}}</td><td>{{.HTTPAddr}}</td><td>{{.Suffrage}}</td><td>{{if .Leader}}yes{{end}}</td></tr>{{end}}
</table>
<h2>Workers</h2>
<table><tr><th>ID</th><th>Address</th><th>State</th><th>Cores (used/total)</th><th>Memory MiB (used/total)</th></tr>
{{range .Workers}}<tr><td>{{.ID}}</td><td>{{.HTTPAddr}}</td><td>{{.State}}</td><td>{{.CoresUsed}}/{{.Cores}}</td><td>{{.MemoryUsedMB}}/{{.MemoryMB}}</td></tr>{{end}}
</table>
<h2>Drivers</h2>
<table><tr><th>ID</th><th>Name</th><th>State</th><th>Worker</th><th>Attempt</th><th>Supervise</th><th>Submitted</th><th>Message</th></tr>
{{range .Drivers}}<tr><td>{{.ID}}</td><td>{{.Name}}</td><td>{{.State}}</td><td>{{.WorkerID}}</td><td>{{.Attempt}}</td><td>{{.Supervise}}</td><td>{{ms .SubmittedAt}}</td><td>{{.Message}}</td></tr>{{end}}
</table>
<h2>Applications</h2>
<table><tr><th>ID</th><th>Name</th><th>State</th><th>Driver</th><th>Cores (granted/max)</th><th>Per executor</th><th>Submitted</th><th>Message</th></tr>
{{range .Apps}}<tr><td>{{.ID}}</td><td>{{.Name}}</td><td>{{.State}}</td><td>{{.DriverID}}</td><td>{{.CoresGranted}}/{{if .MaxCores}}{{.MaxCores}}{{else}}-{{end}}</td><td>{{.CoresPerExecutor}} cores, {{.MemoryPerExecutorMB}} MiB</td><td>{{ms .SubmittedAt}}</td><td>{{.Message}}</td></tr>{{end}}
</table>
<h2>Executors</h2>
<table><tr><th>App</th><th>ID</th><th>Worker</th><th>State</th><th>Cores</th><th>Memory MiB</th><th>Started</th><th>Exit</th><th>Message</th></tr>
{{range .Apps}}{{range .Executors}}<tr><td>{{.AppID}}</td><td>{{.ID}}</td><td>{{.WorkerID}}</td><td>{{.State}}</td><td>{{.Cores}}</td><td>{{.MemoryMB}}</td><td>{{ms .StartedAt}}</td><td>{{with .ExitCode}}{{.}}{{end}}</td><td>{{.Message}}</td></tr>{{end}}{{end}}
</table>
</body></html>
`))

// handlePage serves a human view of this master's tables; a follower shows
// its own view and links to the leader.
func (m *Master) handlePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplate.Execute(w, m.State()); err != nil {
		m.log.Warn("render page", "err", err)
	}
}
