package l2

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/fuzzcorpus"
)

// TestFuzzPieceBites proves FuzzPiece's check fails, with a committed
// seed, on a codec that skips the MACs (a forged or damaged piece is
// served), and that no seed fails the real codecs.
func TestFuzzPieceBites(t *testing.T) {
	codecs := fuzzPieceCodecs()
	skip := *codecs[1]
	skip.skipMAC = true
	caught := ""
	for _, s := range pieceSeeds() {
		for _, c := range codecs {
			if err := checkPieceBytes(s.data, c); err != nil {
				t.Fatalf("seed %s fails the real codec (key id %#x): %v", s.name, c.KeyID(), err)
			}
		}
		if err := checkPieceBytes(s.data, &skip); err != nil && strings.Contains(err.Error(), "not its writer's") && caught == "" {
			caught = s.name
			t.Logf("caught by seed %s: %v", s.name, err)
		}
	}
	if caught == "" {
		t.Fatal("no seed makes the check catch a codec that skips the MAC")
	}
}

// TestPieceSeedCorpus keeps testdata/fuzz/FuzzPiece, the corpus the
// libFuzzer build ships, in step with pieceSeeds. With
// KVALLOC_UPDATE_CORPUS=1 it rewrites the files instead.
func TestPieceSeedCorpus(t *testing.T) {
	var seeds []fuzzcorpus.Seed
	for _, s := range pieceSeeds() {
		seeds = append(seeds, fuzzcorpus.Seed{Name: s.name, Data: s.data})
	}
	for _, err := range fuzzcorpus.Sync(filepath.Join("testdata", "fuzz", "FuzzPiece"), seeds, os.Getenv("KVALLOC_UPDATE_CORPUS") == "1") {
		t.Error(err)
	}
}
