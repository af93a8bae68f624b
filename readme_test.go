package podkit_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// errorReturning are the calls of the README's snippets whose error must be
// handled: the engine's methods and constructor that return one.
var errorReturning = map[string]bool{"New": true, "Run": true, "UpdatePod": true, "KillPod": true, "WaitFor": true, "WaitForStage": true}

// The README's Go snippets are what users copy: each must parse, and handle
// every error the engine gives it (see checkSnippet). Problems are reported
// at their line in README.md.
func TestREADMESnippetHandlesEveryError(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := goSnippets(string(readme))
	if len(snippets) == 0 {
		t.Fatal("README.md has no Go snippet")
	}
	calls := 0
	for _, s := range snippets {
		if s.unclosed {
			t.Fatalf("README.md:%d: the Go snippet is not closed", s.line-1)
		}
		problems, n, err := checkSnippet("README.md", s.line, s.text)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
		calls += n
	}
	if calls < 4 {
		t.Fatalf("the snippets make %d calls of the engine that return errors; want New, Run, UpdatePod and KillPod at least", calls)
	}
}

// snippet is one ```go block of a Markdown file: its text, and the line of
// the file its text starts on.
type snippet struct {
	line     int
	text     string
	unclosed bool
}

func goSnippets(md string) []snippet {
	var out []snippet
	lines := strings.SplitAfter(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		s := snippet{line: i + 2, unclosed: true}
		var b strings.Builder
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				s.unclosed = false
				break
			}
			b.WriteString(lines[i])
		}
		s.text = b.String()
		out = append(out, s)
	}
	return out
}

// checkSnippet parses src, a snippet found at line line of file, and returns
// every error of an errorReturning call it drops, at its line in file, and
// how many such calls it makes. A snippet is declarations, or else
// statements (a function body). An error is dropped when the call is
//   - a bare statement, run with go, or deferred;
//   - assigned to _;
//   - assigned to a variable (err = ..., x, err := ...) that is not read
//     afterwards in the same block (an if's init: in the if) before it is
//     assigned again. A bare return reads the function's named results.
//
// The last is a syntactic approximation, made for snippets: it does not
// follow shadowing or control flow.
func checkSnippet(file string, line int, src string) (problems []string, calls int, err error) {
	fset := token.NewFileSet()
	at := fmt.Sprintf("//line %s:%d:1\n", file, line)
	f, err := parser.ParseFile(fset, file, "package readme\n"+at+src, parser.SkipObjectResolution)
	if err != nil {
		f, err = parser.ParseFile(fset, file, "package readme\nfunc _() {\n"+at+src+"}\n", parser.SkipObjectResolution)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("a Go snippet does not parse: %v", err)
	}
	report := func(n ast.Node, name, how string) {
		problems = append(problems, fmt.Sprintf("%s: the error of %s is dropped (%s)", fset.Position(n.Pos()), name, how))
	}
	check := func(call ast.Expr, how string) {
		if name := calledName(call); errorReturning[name] {
			report(call, name, how)
		}
	}
	// checkAssign checks an assignment of a call's error to a variable,
	// which must be read in rest.
	checkAssign := func(a *ast.AssignStmt, fn *ast.FuncType, rest []ast.Node) {
		if len(a.Rhs) != 1 {
			return
		}
		name := calledName(a.Rhs[0])
		if !errorReturning[name] {
			return
		}
		v, ok := a.Lhs[len(a.Lhs)-1].(*ast.Ident)
		switch {
		case !ok:
			// Stored in a field or element: someone else's to check.
		case v.Name == "_":
			report(a.Rhs[0], name, "assigned to _")
		default:
			switch readFirst(v.Name, fn, rest) {
			case overwritten:
				report(a.Rhs[0], name, "assigned to "+v.Name+", which is assigned again before it is read")
			case unread:
				report(a.Rhs[0], name, "assigned to "+v.Name+", which is never read")
			}
		}
	}
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
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
		case *ast.IfStmt:
			if a, ok := n.Init.(*ast.AssignStmt); ok {
				rest := []ast.Node{n.Cond, n.Body}
				if n.Else != nil {
					rest = append(rest, n.Else)
				}
				checkAssign(a, enclosingFunc(stack), rest)
			}
		case *ast.BlockStmt:
			checkList(n.List, enclosingFunc(stack), checkAssign)
		case *ast.CaseClause:
			checkList(n.Body, enclosingFunc(stack), checkAssign)
		case *ast.CommClause:
			checkList(n.Body, enclosingFunc(stack), checkAssign)
		}
		return true
	})
	return problems, calls, nil
}

// checkList runs checkAssign on each assignment of stmts, with the
// statements after it.
func checkList(stmts []ast.Stmt, fn *ast.FuncType, checkAssign func(*ast.AssignStmt, *ast.FuncType, []ast.Node)) {
	for i, s := range stmts {
		if a, ok := s.(*ast.AssignStmt); ok {
			rest := make([]ast.Node, 0, len(stmts)-i-1)
			for _, r := range stmts[i+1:] {
				rest = append(rest, r)
			}
			checkAssign(a, fn, rest)
		}
	}
}

// enclosingFunc is the type of the innermost function of stack, or nil.
func enclosingFunc(stack []ast.Node) *ast.FuncType {
	for i := len(stack) - 1; i >= 0; i-- {
		switch f := stack[i].(type) {
		case *ast.FuncLit:
			return f.Type
		case *ast.FuncDecl:
			return f.Type
		}
	}
	return nil
}

type readResult int

const (
	unread readResult = iota
	read
	overwritten
)

// readFirst reports what happens first to the variable name in nodes, in
// source order: it is read, it is assigned again (and not read by that
// assignment's right side), or neither.
func readFirst(name string, fn *ast.FuncType, nodes []ast.Node) readResult {
	result := unread
	for _, node := range nodes {
		ast.Inspect(node, func(n ast.Node) bool {
			if result != unread {
				return false
			}
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, r := range n.Rhs {
					if mentions(r, name) {
						result = read
						return false
					}
				}
				for _, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name == name {
						result = overwritten
						return false
					}
				}
				return false
			case *ast.ReturnStmt:
				if len(n.Results) == 0 && namedResult(fn, name) {
					result = read
					return false
				}
			case *ast.Ident:
				if n.Name == name {
					result = read
				}
			}
			return true
		})
		if result != unread {
			break
		}
	}
	return result
}

// mentions reports whether the identifier name occurs in e.
func mentions(e ast.Node, name string) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == name {
			found = true
		}
		return !found
	})
	return found
}

// namedResult reports whether name is a named result of fn.
func namedResult(fn *ast.FuncType, name string) bool {
	if fn == nil || fn.Results == nil {
		return false
	}
	for _, f := range fn.Results.List {
		for _, n := range f.Names {
			if n.Name == name {
				return true
			}
		}
	}
	return false
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

// The checker itself: each way of dropping an error is caught, at its line
// in the Markdown file, and each way of handling one passes.
func TestSnippetChecker(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      string // "" when the snippet handles every error
	}{
		{"a bare call", "w.Run(ctx)\n", "doc.md:10:1: the error of Run is dropped (a bare statement)"},
		{"run with go", "go w.Run(ctx)\n", "doc.md:10:4: the error of Run is dropped (run with go)"},
		{"deferred", "defer w.Run(ctx)\n", "doc.md:10:7: the error of Run is dropped (deferred)"},
		{"assigned to _", "x := 1\n_ = w.UpdatePod(ctx, opts)\n", "doc.md:11:5: the error of UpdatePod is dropped (assigned to _)"},
		{"assigned and never read", "var err error\nerr = w.KillPod(ctx, pod, opts)\nfmt.Println(\"done\")\n", "doc.md:11:7: the error of KillPod is dropped (assigned to err, which is never read)"},
		{"assigned and overwritten", "err := w.UpdatePod(ctx, opts)\nerr = w.KillPod(ctx, pod, opts)\nreturn err\n", "doc.md:10:8: the error of UpdatePod is dropped (assigned to err, which is assigned again before it is read)"},
		{"a constructor's error unread", "w, err := podworker.New(s, o)\nuse(w)\n", "doc.md:10:11: the error of New is dropped (assigned to err, which is never read)"},
		{"read in an if's init only", "if err := w.UpdatePod(ctx, opts); true {\n}\n", "doc.md:10:11: the error of UpdatePod is dropped (assigned to err, which is never read)"},
		{"checked by an if", "if err := w.UpdatePod(ctx, opts); err != nil {\n\treturn err\n}\n", ""},
		{"checked later", "w, err := podworker.New(s, o)\nif err != nil {\n\treturn err\n}\nuse(w)\n", ""},
		{"returned", "return w.Run(ctx)\n", ""},
		{"sent", "ran <- w.Run(ctx)\n", ""},
		{"joined", "var err error\nerr = w.Run(ctx)\nerr = errors.Join(err, other)\nreturn err\n", ""},
		{"a bare return of a named result", "func f() (err error) {\n\terr = w.Run(ctx)\n\treturn\n}\n", ""},
		{"a named result then overwritten", "func f() (err error) {\n\terr = w.Run(ctx)\n\treturn nil\n}\n", "doc.md:11:8: the error of Run is dropped (assigned to err, which is never read)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, _, err := checkSnippet("doc.md", 10, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(problems, "; ")
			if got != tc.want {
				t.Fatalf("checking\n%s\ngot  %q\nwant %q", tc.src, got, tc.want)
			}
		})
	}
}

// Lines are the Markdown file's: a snippet's first line is the line after
// its fence.
func TestGoSnippetsKnowTheirLines(t *testing.T) {
	md := "# Title\n\n```sh\nls\n```\n\n```go\nw.Run(ctx)\n```\n\ntext\n```go\nx := 1\n```\n"
	got := goSnippets(md)
	if len(got) != 2 || got[0].line != 8 || got[0].text != "w.Run(ctx)\n" || got[1].line != 13 || got[1].unclosed {
		t.Fatalf("goSnippets = %+v", got)
	}
	problems, _, err := checkSnippet("doc.md", got[0].line, got[0].text)
	if err != nil || len(problems) != 1 || !strings.HasPrefix(problems[0], "doc.md:8:1: ") {
		t.Fatalf("problems %q, err %v; want one at doc.md:8:1", problems, err)
	}
}
