package podkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// errorReturning are the calls of the README's snippet whose error must be
// handled: the engine's methods and constructor that return one.
var errorReturning = map[string]bool{"New": true, "Run": true, "UpdatePod": true, "KillPod": true, "WaitFor": true, "WaitForStage": true}

// The README's snippet is what users copy: it must parse, and handle every
// error the engine gives it (no call left as a bare statement, run with go
// or defer, or assigned to _).
func TestREADMESnippetHandlesEveryError(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no Go snippet")
	}
	snippet, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md's Go snippet is not closed")
	}
	fset := token.NewFileSet()
	// The snippet is declarations, or else statements (a function body).
	file, err := parser.ParseFile(fset, "README.md", "package readme\n"+snippet, parser.SkipObjectResolution)
	if err != nil {
		file, err = parser.ParseFile(fset, "README.md", "package readme\nfunc _() {\n"+snippet+"}\n", parser.SkipObjectResolution)
	}
	if err != nil {
		t.Fatalf("the README's snippet does not parse: %v", err)
	}
	calls := 0
	check := func(call ast.Expr, how string) {
		if name := calledName(call); errorReturning[name] {
			t.Errorf("%s: the error of %s is dropped (%s)", fset.Position(call.Pos()), name, how)
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if errorReturning[calledName(n)] {
				calls++
			}
		case *ast.ExprStmt:
			check(n.X, "a bare statement")
		case *ast.GoStmt:
			check(n.Call, "run with go")
		case *ast.DeferStmt:
			check(n.Call, "deferred")
		case *ast.AssignStmt:
			if len(n.Rhs) == 1 {
				if last, ok := n.Lhs[len(n.Lhs)-1].(*ast.Ident); ok && last.Name == "_" {
					check(n.Rhs[0], "assigned to _")
				}
			}
		}
		return true
	})
	if calls < 4 {
		t.Fatalf("the snippet makes %d calls of the engine that return errors; want New, Run, UpdatePod and KillPod at least", calls)
	}
}

// calledName is the name of the function or method call calls, or "".
func calledName(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	fun := call.Fun
	if ix, ok := fun.(*ast.IndexExpr); ok { // New[struct{}]
		fun = ix.X
	}
	switch f := fun.(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.Ident:
		return f.Name
	}
	return ""
}
