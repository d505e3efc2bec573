package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/drover-project/drover/api"
)

func (k *cli) apps(ctx context.Context, args []string) int {
	fs := k.flags("apps")
	asJSON := fs.Bool("json", false, "print a JSON array of applications with their executors")
	all := fs.Bool("all-namespaces", false, "list the applications of every namespace, not only --namespace's")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return k.exitFor(fmt.Errorf("apps takes no arguments, got %q", fs.Args()))
	}
	var q api.ListQuery
	var err error
	if q.Namespace, err = k.listNamespace(fs, *all); err != nil {
		return k.exitFor(err)
	}
	as := []api.AppStatus{}
	if err = k.call(ctx, func(ctx context.Context) error {
		return k.c.ListApps(ctx, q, func(page []api.AppStatus) error {
			as = append(as, page...)
			return nil
		})
	}); err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		return k.printJSON(as)
	}
	tw := tabwriter.NewWriter(k.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tCORES\tEXECUTORS\tDRIVER\tSUBMITTED")
	for _, a := range as {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.ID, a.Name, a.State, fmtCores(a),
			liveExecutors(a), a.DriverID, fmtTime(a.SubmittedAt))
	}
	tw.Flush()
	return 0
}

func fmtCores(a api.AppStatus) string {
	if a.MaxCores == 0 {
		return fmt.Sprintf("%d", a.CoresGranted)
	}
	return fmt.Sprintf("%d/%d", a.CoresGranted, a.MaxCores)
}

func liveExecutors(a api.AppStatus) int {
	n := 0
	for _, e := range a.Executors {
		if !e.State.Terminal() {
			n++
		}
	}
	return n
}

func (k *cli) app(ctx context.Context, args []string) int {
	fs := k.flags("app")
	asJSON := fs.Bool("json", false, "print the application and its executors as one JSON object")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	id, err := oneArg(fs, "APP_ID")
	if err != nil {
		return k.exitFor(err)
	}
	var a api.AppStatus
	if err := k.call(ctx, func(ctx context.Context) (err error) {
		a, err = k.c.AppStatus(ctx, id)
		return err
	}); err != nil {
		return k.exitFor(err)
	}
	if *asJSON {
		return k.printJSON(a)
	}
	printApp(k.stdout, a)
	return 0
}

func printApp(w io.Writer, a api.AppStatus) {
	fmt.Fprintf(w, "id:         %s\n", a.ID)
	if a.Name != "" {
		fmt.Fprintf(w, "name:       %s\n", a.Name)
	}
	fmt.Fprintf(w, "state:      %s\n", a.State)
	if a.DriverID != "" {
		fmt.Fprintf(w, "driver:     %s attempt %d\n", a.DriverID, a.DriverAttempt)
	}
	fmt.Fprintf(w, "cores:      %s granted, %d per executor\n", fmtCores(a), a.CoresPerExecutor)
	fmt.Fprintf(w, "memory:     %d MiB per executor\n", a.MemoryPerExecutorMB)
	if a.User != "" {
		fmt.Fprintf(w, "user:       %s\n", a.User)
	}
	if a.ExecutorLimit >= 0 {
		fmt.Fprintf(w, "executors:  %d live, limit %d\n", liveExecutors(a), a.ExecutorLimit)
	} else {
		fmt.Fprintf(w, "executors:  %d live\n", liveExecutors(a))
	}
	fmt.Fprintf(w, "retries:    %d failed in a row (max %d)\n", a.RetryCount, a.MaxExecutorRetries)
	fmt.Fprintf(w, "submitted:  %s\n", fmtTime(a.SubmittedAt))
	if a.EndedAt != 0 {
		fmt.Fprintf(w, "ended:      %s\n", fmtTime(a.EndedAt))
	}
	fmt.Fprintf(w, "program:    %q\n", a.Argv)
	if a.Message != "" {
		fmt.Fprintf(w, "message:    %s\n", a.Message)
	}
	if len(a.Executors) == 0 {
		return
	}
	fmt.Fprintln(w, "executors:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tWORKER\tSTATE\tCORES\tMEMORY\tSTARTED\tENDED\tEXIT\tMESSAGE")
	for _, e := range a.Executors {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d MiB\t%s\t%s\t%s\t%s\n", e.ID, e.WorkerID, e.State, e.Cores, e.MemoryMB,
			fmtTime(e.StartedAt), fmtTime(e.EndedAt), fmtExit(e.ExitCode), e.Message)
	}
	tw.Flush()
}

func (k *cli) killApp(ctx context.Context, args []string) int {
	fs := k.flags("kill-app")
	if code, ok := k.parse(fs, args); !ok {
		return code
	}
	id, err := oneArg(fs, "APP_ID")
	if err != nil {
		return k.exitFor(err)
	}
	if err := k.call(ctx, func(ctx context.Context) error { return k.c.KillApp(ctx, id) }); err != nil {
		return k.exitFor(err)
	}
	fmt.Fprintf(k.stdout, "killed %s\n", id)
	return 0
}
