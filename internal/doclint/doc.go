// Package doclint checks the repository's documents against its code:
// every file, path and Go name that README.md and docs/*.md quote in
// backticks exists in the repository (TestDocReferencesResolve). It has
// no code of its own; the check is its test.
package doclint
