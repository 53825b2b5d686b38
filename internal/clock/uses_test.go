package clock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoDirectTime: the packages whose time is injected read it only
// through a Clock; a call to time.Now, time.Sleep or a time-package
// timer there would escape the simulator's clock.
func TestNoDirectTime(t *testing.T) {
	banned := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true}
	for _, pkg := range []string{"broker", "handler", "group", "storage", "txn"} {
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files (%v)", pkg, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			timePkg := ""
			for _, imp := range f.Imports {
				if imp.Path.Value == `"time"` {
					timePkg = "time"
					if imp.Name != nil {
						timePkg = imp.Name.Name
					}
				}
			}
			if timePkg == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == timePkg && banned[sel.Sel.Name] {
					t.Errorf("%s: time.%s: use the package's clock.Clock", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
