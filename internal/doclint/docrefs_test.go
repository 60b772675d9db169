package doclint_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// docRef is one backticked span of a document: its text and where it is.
type docRef struct {
	doc  string // path from the repository root, such as "docs/guarantees.md"
	line int    // 1-based line of the opening backtick
	text string // what is between the backticks, newlines turned to spaces
}

// docFiles returns README.md and every docs/*.md, from the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, repoRoot+string(filepath.Separator))))
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: the documents moved?", files)
	}
	return files
}

// backticked returns the inline code spans of a Markdown document, leaving
// out fenced blocks (``` ... ```). A span may cross a line break, as
// Markdown allows.
func backticked(doc, text string) []docRef {
	var prose strings.Builder
	fenced := false
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			prose.WriteString("\n") // keep the line count
			continue
		}
		if fenced {
			prose.WriteString("\n")
			continue
		}
		prose.WriteString(line)
	}
	body := prose.String()
	var refs []docRef
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatchIndex(body, -1) {
		refs = append(refs, docRef{
			doc:  doc,
			line: 1 + strings.Count(body[:m[0]], "\n"),
			text: strings.ReplaceAll(body[m[2]:m[3]], "\n", " "),
		})
	}
	return refs
}

// goDecls is what the repository's non-test Go files declare.
type goDecls struct {
	pkgNames map[string]bool            // package clause names: "delayq", "store", ...
	top      map[string]bool            // "pkg.Name": funcs, types, consts, vars
	members  map[string]bool            // "Type.Name": methods, struct fields, interface methods
	pkgMem   map[string]bool            // "pkg.Type.Name"
	embeds   map[string][]string        // Type -> the type names it embeds
	fieldTyp map[string]string          // "Type.Field" -> the field's type name
	typeDirs map[string]map[string]bool // Type -> packages declaring it
}

// typeName returns the name of the named type an expression denotes,
// through pointers, slices, arrays, maps' values, generics and package
// selectors: "Store" for *store.Store.
func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return typeName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.ArrayType:
		return typeName(x.Elt)
	case *ast.MapType:
		return typeName(x.Value)
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.IndexListExpr:
		return typeName(x.X)
	}
	return ""
}

// parseDecls parses every non-test .go file under the repository root.
func parseDecls(t *testing.T) *goDecls {
	t.Helper()
	d := &goDecls{
		pkgNames: map[string]bool{}, top: map[string]bool{}, members: map[string]bool{},
		pkgMem: map[string]bool{}, embeds: map[string][]string{}, fieldTyp: map[string]string{},
		typeDirs: map[string]map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != repoRoot && (strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata" || e.Name() == "vendor") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		d.pkgNames[pkg] = true
		member := func(typ, name string) {
			d.members[typ+"."+name] = true
			d.pkgMem[pkg+"."+typ+"."+name] = true
		}
		for _, decl := range f.Decls {
			switch x := decl.(type) {
			case *ast.FuncDecl:
				if x.Recv == nil {
					d.top[pkg+"."+x.Name.Name] = true
				} else if len(x.Recv.List) == 1 {
					member(typeName(x.Recv.List[0].Type), x.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range x.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							d.top[pkg+"."+n.Name] = true
						}
					case *ast.TypeSpec:
						typ := s.Name.Name
						d.top[pkg+"."+typ] = true
						if d.typeDirs[typ] == nil {
							d.typeDirs[typ] = map[string]bool{}
						}
						d.typeDirs[typ][pkg] = true
						switch st := s.Type.(type) {
						case *ast.StructType:
							for _, f := range st.Fields.List {
								if len(f.Names) == 0 {
									embedded := typeName(f.Type)
									d.embeds[typ] = append(d.embeds[typ], embedded)
									member(typ, embedded)
									continue
								}
								for _, n := range f.Names {
									member(typ, n.Name)
									d.fieldTyp[typ+"."+n.Name] = typeName(f.Type)
								}
							}
						case *ast.InterfaceType:
							for _, m := range st.Methods.List {
								for _, n := range m.Names {
									member(typ, n.Name)
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hasMember reports whether Type.Name is declared, directly or through a
// type Type embeds.
func (d *goDecls) hasMember(typ, name string, seen map[string]bool) bool {
	if d.members[typ+"."+name] {
		return true
	}
	if seen[typ] {
		return false
	}
	seen[typ] = true
	for _, e := range d.embeds[typ] {
		if d.hasMember(e, name, seen) {
			return true
		}
	}
	return false
}

var (
	// goRef is a Go name with one or two selectors, and maybe "()".
	goRef = regexp.MustCompile(`^([A-Za-z_]\w*)\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?(?:\(\))?$`)
	// fileRef is a file name or path with an extension the repository's
	// files have, maybe with a "#anchor" or ":line".
	fileRef = regexp.MustCompile(`^([\w./-]+\.(?:go|sh|toml|md))(?:#[\w-]*|:\d+)?$`)
	// pathRef is a path with a slash, no spaces and no Markdown or URL syntax.
	pathRef = regexp.MustCompile(`^[\w.-]+(?:/[\w.-]+)*/?$`)
)

// dataExt are extensions of data files the documents name (orders.jsonl),
// which have the shape of a Go selector.
var dataExt = map[string]bool{"json": true, "jsonl": true, "png": true, "txt": true, "log": true, "yaml": true, "yml": true, "csv": true}

func isUpper(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// resolveGo checks a Go reference; ok is false only when it has the shape
// of one of the repository's names and names nothing declared. checked is
// false when the reference is not the repository's (time.Now, a span
// attribute such as delayq.attempt).
func (d *goDecls) resolveGo(m []string) (checked, ok bool) {
	a, b, c := m[1], m[2], m[3]
	if dataExt[b] && c == "" {
		return false, true // a data file's name, such as T.jsonl
	}
	switch {
	case d.pkgNames[a] && isUpper(b):
		// pkg.Name or pkg.Type.Member
		if !d.top[a+"."+b] {
			return true, false
		}
		if c == "" {
			return true, true
		}
		return true, d.pkgMem[a+"."+b+"."+c] || d.hasMember(b, c, map[string]bool{})
	case isUpper(a):
		// Type.Member or Type.Field.Member
		if d.typeDirs[a] == nil {
			return true, false
		}
		if !d.hasMember(a, b, map[string]bool{}) {
			return true, false
		}
		if c == "" {
			return true, true
		}
		ft := d.fieldTyp[a+"."+b]
		if ft == "" {
			ft = b // an embedded type, or a method: accept a member of the type named b
		}
		return true, d.hasMember(ft, c, map[string]bool{})
	}
	return false, true
}

// resolveFile checks a file or path reference; checked is false when the
// text is not a path into the repository (a URL route, a package import
// path, a path outside the repository).
func resolveFile(text string, names map[string]bool) (checked, ok bool) {
	if strings.HasPrefix(text, "../") || strings.HasPrefix(text, "/") || strings.HasPrefix(text, "$") {
		return false, true
	}
	if m := fileRef.FindStringSubmatch(text); m != nil {
		p := m[1]
		if strings.HasPrefix(p, ".") || strings.HasPrefix(p, "bin/") {
			return false, true // build and test outputs
		}
		if !strings.Contains(p, "/") {
			return true, names[p]
		}
		_, err := os.Stat(filepath.Join(repoRoot, p))
		return true, err == nil
	}
	if !strings.Contains(text, "/") || !pathRef.MatchString(text) {
		return false, true
	}
	first, _, _ := strings.Cut(text, "/")
	if strings.HasPrefix(first, ".") || first == "bin" {
		return false, true // build and test outputs (.audit/, bin/), not the repository's files
	}
	if fi, err := os.Stat(filepath.Join(repoRoot, first)); err != nil || !fi.IsDir() {
		return false, true // not a path into one of the repository's directories
	}
	_, err := os.Stat(filepath.Join(repoRoot, text))
	return true, err == nil
}

// fileNames returns the base names of the repository's files.
func fileNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != repoRoot && strings.HasPrefix(e.Name(), ".") {
			return filepath.SkipDir
		}
		if !e.IsDir() {
			names[e.Name()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestDocReferencesResolve: every file, path and Go name that README.md
// and docs/*.md quote in backticks exists in the repository, so that a
// renamed file or function cannot leave the documents pointing at
// nothing. Files: a name ending in .go, .sh, .toml or .md exists
// somewhere in the tree, a path with a slash exists from the root (paths
// into directories the repository does not have, such as routes and
// import paths, are not checked). Go names: pkg.Name where pkg is one of
// the repository's package names, pkg.Type.Member, Type.Member and
// Type.Field.Member, where a member is a method, a field or an embedded
// type's member.
func TestDocReferencesResolve(t *testing.T) {
	decls := parseDecls(t)
	names := fileNames(t)
	if !decls.top["delayq.Client"] || !decls.members["Client.Send"] || !decls.top["store.Store"] {
		t.Fatal("the repository's declarations were not found: the parse is broken")
	}
	checkedGo, checkedFiles := 0, 0
	for _, doc := range docFiles(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range backticked(doc, string(data)) {
			text := strings.TrimSpace(ref.text)
			if checked, ok := resolveFile(text, names); checked {
				checkedFiles++
				if !ok {
					t.Errorf("%s:%d: `%s`: no such file in the repository", ref.doc, ref.line, text)
				}
				continue
			}
			if m := goRef.FindStringSubmatch(text); m != nil {
				if checked, ok := decls.resolveGo(m); checked {
					checkedGo++
					if !ok {
						t.Errorf("%s:%d: `%s`: not declared in the repository's Go source", ref.doc, ref.line, text)
					}
				}
			}
		}
	}
	if checkedGo < 20 || checkedFiles < 5 {
		t.Errorf("checked only %d Go names and %d files: the scan is broken", checkedGo, checkedFiles)
	}
}
