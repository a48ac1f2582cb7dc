// Package ilb is the root of the ilb module: an open-source router for LLM
// inference fleets. The code lives in schemas/, streams/, solver/ and
// services/ (see README.md); this package holds only the tests that keep
// the module's layout honest: the dependency direction and package docs.
//
// # Concurrency
//
// Nothing here runs at run time.
package ilb
