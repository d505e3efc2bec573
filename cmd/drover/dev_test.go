package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-project/drover/internal/devsecrets"
)

// drover dev refuses, before it makes anything, what would start a
// cluster whose workers or masters die at start, and a --spark-launcher
// that no master would use.
func TestDevRefusesWorkersThatCannotStart(t *testing.T) {
	for _, args := range [][]string{
		{"--worker-cores", "0"}, {"--worker-cores", "-2"}, {"--worker-memory", "0"}, {"--masters", "0"}, {"--workers", "-1"},
		{"--spark-launcher", "spark-submit {{mainClas}}", "--spark-rest-port", "6066"}, {"--spark-launcher", "spark-submit"},
	} {
		dir := filepath.Join(t.TempDir(), "cluster")
		if code := runDev(append([]string{"--dir", dir}, args...)); code != 1 {
			t.Errorf("dev %v: exit %d, want 1", args, code)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("dev %v made %s", args, dir)
		}
	}
}

// dev's env file is a shell's to source: after `. FILE` the exports reach
// a program the shell starts (drover client), and the other assignments
// are the shell's, whatever quotes, spaces or dollars the directory's
// name holds.
func TestDevEnvFileCanBeSourced(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, `it's a "dev" $HOME dir`)
	file := filepath.Join(base, "cluster.env")
	env := devEnv("127.0.0.1:7102,127.0.0.1:7202", "spark://127.0.0.1:6066", &devsecrets.Secrets{
		CA: filepath.Join(dir, "secrets", "ca.pem"), SubmitToken: filepath.Join(dir, "secrets", "submit.token"),
	})
	nodes := []*devNode{{id: "m1", http: "127.0.0.1:7102", cmd: &exec.Cmd{Process: &os.Process{Pid: 4242}}}}
	if err := writeEnvFile(file, dir, env, nodes); err != nil {
		t.Fatal(err)
	}
	// env -i: only what the file sets and exports is there; the child
	// shell sees the exports only.
	out, err := exec.Command("env", "-i", "/bin/sh", "-c",
		`. "$1" && printf '%s\n' "$DROVER_DEV_DIR" "$m1_PID" "$m1_HTTP" && /bin/sh -c 'printf "%s\n" "$DROVER_MASTERS" "$SPARK_MASTER_URL" "$DROVER_CACERT" "$DROVER_TOKEN_FILE" "${DROVER_DEV_DIR-unset}"'`,
		"sh", file).CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing %s: %v\n%s", file, err, out)
	}
	want := strings.Join([]string{dir, "4242", "127.0.0.1:7102",
		"127.0.0.1:7102,127.0.0.1:7202", "spark://127.0.0.1:6066", filepath.Join(dir, "secrets", "ca.pem"), filepath.Join(dir, "secrets", "submit.token"), "unset"}, "\n") + "\n"
	if string(out) != want {
		b, _ := os.ReadFile(file)
		t.Errorf("the shell got\n%s\nwant\n%s\nfrom the file\n%s", out, want, b)
	}
}
