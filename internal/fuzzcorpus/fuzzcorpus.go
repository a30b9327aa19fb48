// Package fuzzcorpus keeps a fuzz target's committed seed corpus in step
// with the seeds its test code makes: one file per named seed, in Go's
// "go test fuzz v1" format, under DIR/testdata/fuzz/FuzzX/, which go test
// runs as the target's regression inputs and the libFuzzer build ships
// as its seed corpus.
package fuzzcorpus

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Header opens every corpus file in Go's format.
const Header = "go test fuzz v1\n"

// File renders one []byte input as a corpus file in Go's format.
func File(data []byte) []byte {
	return fmt.Appendf(nil, "%s[]byte(%q)\n", Header, data)
}

// Seed is one named input of a target.
type Seed struct {
	Name string
	Data []byte
}

// Sync checks that every seed is committed in dir under its name with
// exactly its bytes (File), and returns an error for each that is
// missing or stale; with update it writes them instead (creating dir).
func Sync(dir string, seeds []Seed, update bool) []error {
	var errs []error
	for _, s := range seeds {
		path := filepath.Join(dir, s.Name)
		want := File(s.Data)
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return append(errs, err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %v (run with KVALLOC_UPDATE_CORPUS=1 to write it)", path, err))
		case !bytes.Equal(got, want):
			errs = append(errs, fmt.Errorf("%s is stale (run with KVALLOC_UPDATE_CORPUS=1 to rewrite it)", path))
		}
	}
	return errs
}
