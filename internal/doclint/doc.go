// Package doclint checks the repository's documents against its code:
// every file, path and Go name that README.md and docs/*.md quote in
// backticks exists in the repository (TestDocReferencesResolve), and every
// package's doc.go names each of its files and no file it lacks
// (TestPackageDocsNameTheirFiles). It has no code of its own; the checks
// are its tests.
//
// Files:
//
//   - docrefs_test.go: TestDocReferencesResolve
//   - filemap_test.go: TestPackageDocsNameTheirFiles
package doclint
