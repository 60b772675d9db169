package doclint_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// goFileName is a .go file's name, or its path, as a comment names it.
var goFileName = regexp.MustCompile(`(?:[\w.-]+/)*[\w.-]*\w\.go\b`)

// packageDirs returns, for every directory under root that holds non-test
// .go files (leaving out hidden directories, testdata and vendor), the
// names of those files, by directory relative to root ("." for the root).
func packageDirs(root string) (map[string][]string, error) {
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dirs[filepath.ToSlash(rel)] = append(dirs[filepath.ToSlash(rel)], name)
		return nil
	})
	return dirs, err
}

// fileMapProblems checks the package comment of the doc.go of every
// package directory under root against the directory's files, and
// returns what is wrong, one line per problem, sorted.
func fileMapProblems(root string) ([]string, error) {
	dirs, err := packageDirs(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	bad := func(dir, format string, args ...any) {
		problems = append(problems, dir+"/doc.go: "+fmt.Sprintf(format, args...))
	}
	fset := token.NewFileSet()
	for dir, files := range dirs {
		doc := filepath.Join(root, filepath.FromSlash(dir), "doc.go")
		f, err := parser.ParseFile(fset, doc, nil, parser.ParseComments|parser.PackageClauseOnly)
		if os.IsNotExist(err) {
			bad(dir, "missing: the package's comment, with a line for each of its files, belongs there")
			continue
		}
		if err != nil {
			return nil, err
		}
		if f.Doc == nil {
			bad(dir, "has no package comment")
			continue
		}
		named := map[string]bool{}
		for _, name := range goFileName.FindAllString(f.Doc.Text(), -1) {
			path := filepath.Join(root, filepath.FromSlash(dir), filepath.FromSlash(name))
			if strings.Contains(name, "/") && !strings.HasPrefix(name, "./") && !strings.HasPrefix(name, "../") {
				path = filepath.Join(root, filepath.FromSlash(name)) // a path from the repository's root
			}
			if _, err := os.Stat(path); err != nil {
				bad(dir, "names %s, which does not exist", name)
				continue
			}
			if filepath.Dir(path) == filepath.Dir(doc) {
				named[filepath.Base(path)] = true
			}
		}
		for _, file := range files {
			if file != "doc.go" && !named[file] {
				bad(dir, "does not name %s: say in its Files list what the file holds", file)
			}
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// TestPackageDocsNameTheirFiles: the map of the source tree is the
// packages' documentation (go doc ./poller), so that it cannot drift from
// the tree. Every directory with non-test .go files has a doc.go whose
// package comment names each of those files (doc.go aside), as a line of
// its Files list saying what the file holds, and names no .go file that
// does not exist: a file of its own directory by its name, or any file by
// its path from the repository's root.
func TestPackageDocsNameTheirFiles(t *testing.T) {
	dirs, err := packageDirs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{".", "poller", "internal/store", "cmd/delayq"} {
		if len(dirs[dir]) == 0 {
			t.Fatalf("no Go files found in %s: the walk is broken", dir)
		}
	}
	problems, err := fileMapProblems(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestFileMapProblemsFound: the check of TestPackageDocsNameTheirFiles
// finds each kind of problem in a tree made for it: a package without a
// doc.go, a file its doc.go does not name, a file its doc.go names that is
// not there, and a doc.go with no package comment; and it passes a
// package whose doc.go is right and skips testdata and hidden directories.
func TestFileMapProblemsFound(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		path = filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good/doc.go", "// Package good is right.\n//\n// Files:\n//\n//   - a.go: A\n//   - b_unix.go: B, see also other/x.go\npackage good\n")
	write("good/a.go", "package good\n")
	write("good/b_unix.go", "package good\n")
	write("good/a_test.go", "package good\n")
	write("other/x.go", "package other\n") // no doc.go
	write("stale/doc.go", "// Package stale names a file gone.\n//\n// Files:\n//\n//   - a.go: A\n//   - gone.go: nothing\npackage stale\n")
	write("stale/a.go", "package stale\n")
	write("short/doc.go", "// Package short leaves a file out.\n//\n// Files:\n//\n//   - a.go: A\npackage short\n")
	write("short/a.go", "package short\n")
	write("short/b.go", "package short\n")
	write("bare/doc.go", "package bare\n")
	write("bare/a.go", "// Package bare has its comment elsewhere.\npackage bare\n")
	write("good/testdata/t.go", "package t\n")
	write(".hidden/h.go", "package h\n")

	got, err := fileMapProblems(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"bare/doc.go: has no package comment",
		"other/doc.go: missing: the package's comment, with a line for each of its files, belongs there",
		"short/doc.go: does not name b.go: say in its Files list what the file holds",
		"stale/doc.go: names gone.go, which does not exist",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
