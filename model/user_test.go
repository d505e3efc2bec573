package model

import (
	"strings"
	"testing"
)

// CheckUser takes what useradd takes by default, [a-z_][a-z0-9_-]*[$]? of
// up to 32 bytes, and "" for the worker's default; everything else is
// refused in one line saying why, a uid as a uid.
func TestCheckUser(t *testing.T) {
	for _, ok := range []string{"", "nobody", "etl", "_svc", "a", "spark-etl_2", "host$", "a1", strings.Repeat("a", MaxUserLen)} {
		if err := CheckUser(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []struct{ user, want string }{
		{strings.Repeat("a", MaxUserLen+1), "exceeds 32 bytes"},
		{strings.Repeat("é", 1<<10), "exceeds 32 bytes (it has 2048)"},
		{"1000", "numeric uid"},
		{"0", "numeric uid"},
		{"Root", "not a portable user name"},
		{"-x", "not a portable user name"},
		{"1abc", "not a portable user name"},
		{"a b", "not a portable user name"},
		{"a$b", "not a portable user name"},
		{"$", "not a portable user name"},
		{"a.b", "not a portable user name"},
		{"../x", "not a portable user name"},
		{"a\nb", `"a\nb"`},
		{"ユーザ", "not a portable user name"},
	} {
		err := CheckUser(bad.user)
		if err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", bad.user, err, bad.want)
		}
	}
	if err := (&RegisterApp{CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"x"}, User: "Root"}).Validate(); err == nil {
		t.Error("a registration naming user Root passed")
	}
}
