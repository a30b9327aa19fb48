//go:build linux

package cluster

import (
	"bytes"
	"path/filepath"

	"github.com/kvalloc/kvalloc/bench/scenario"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// LoadTrace reads a trace: a file in the Mooncake JSONL format (gzipped
// or not), or a trace shape file (.shape, testdata/scenarios/SHAPES.md),
// which it generates in memory and reads back with the same reader, so
// that both kinds replay alike. The trace's name is the file's base name.
// It returns the shape's conversations (nil for a trace file).
func LoadTrace(path string) (*trace.Trace, *scenario.ShapeTrace, error) {
	if filepath.Ext(path) != ".shape" {
		tr, err := trace.ReadFile(path, 0)
		if err == nil {
			tr.Name = trace.BaseName(path)
		}
		return tr, nil, err
	}
	s, err := scenario.ParseShapeFile(path)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	st, err := s.Generate(&buf)
	if err != nil {
		return nil, nil, err
	}
	tr, err := trace.Parse(s.Name, &buf, int64(s.BlockTokens))
	return tr, st, err
}
