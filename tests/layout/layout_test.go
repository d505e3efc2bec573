// Package layout holds the tree to the shape docs/architecture.md draws:
// at most fourteen folders at the top, the master's and the worker's
// wings apart, the FSM free of the HTTP bodies, the worker free of the
// runner's supervisor, and no type grown past maxMethods methods.
package layout

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/drover-project/drover"

// root is the module's root, two folders above this package.
var root = filepath.Join("..", "..")

// maxMethods bounds the methods of one type outside tests.
const maxMethods = 45

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	GoFiles    []string
}

// packages lists the module's packages with `go list -json`.
func packages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// side names where a package of the module stands: the master's wing,
// the worker's, the harnesses above both, or shared below both.
func side(path string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	first, _, _ := strings.Cut(rel, "/")
	switch first {
	case "master", "worker":
		return first
	case "cmd", "tests", "jepsen", "examples":
		return "top"
	}
	return "shared"
}

// TestTopLevelFolders: at most fourteen folders at the top.
func TestTopLevelFolders(t *testing.T) {
	des, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, de := range des {
		if de.IsDir() && !strings.HasPrefix(de.Name(), ".") {
			dirs = append(dirs, de.Name())
		}
	}
	if len(dirs) > 14 {
		t.Errorf("%d top-level folders, want at most 14: %v", len(dirs), dirs)
	}
}

// TestWingsImportNoOtherWing: a shared package imports neither wing, and
// neither wing imports the other or a harness.
func TestWingsImportNoOtherWing(t *testing.T) {
	for _, p := range packages(t) {
		from := side(p.ImportPath)
		if from == "top" {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if to := side(imp); to != "shared" && to != from {
				t.Errorf("%s (%s) imports %s (%s)", p.ImportPath, from, imp, to)
			}
		}
	}
}

// TestDependencies: the FSM and its change feed link no HTTP bodies, the
// worker links neither the runner nor its artifact and isolation code,
// and the leader's term links no client.
func TestDependencies(t *testing.T) {
	for pkg, banned := range map[string][]string{
		"./fsm":           {"api"},
		"./fsm/events":    {"api"},
		"./worker":        {"worker/artifact", "worker/isolation", "worker/runner"},
		"./master/leader": {"client"},
	} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, b := range banned {
			for _, d := range deps {
				if d == module+"/"+b {
					t.Errorf("%s links %s", pkg, d)
				}
			}
		}
	}
}

// TestNoTypeHasTooManyMethods: no type outside tests has more than
// maxMethods methods.
func TestNoTypeHasTooManyMethods(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range packages(t) {
		count := map[string]int{}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
					count[receiver(fd.Recv.List[0].Type)]++
				}
			}
		}
		for typ, n := range count {
			if n > maxMethods {
				t.Errorf("%s.%s has %d methods, want at most %d", p.ImportPath, typ, n, maxMethods)
			}
		}
	}
}

// receiver names a method's receiver type: T of T, *T, T[P] or *T[P].
func receiver(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiver(e.X)
	case *ast.IndexExpr:
		return receiver(e.X)
	case *ast.IndexListExpr:
		return receiver(e.X)
	case *ast.Ident:
		return e.Name
	}
	return fmt.Sprintf("%T", e)
}
