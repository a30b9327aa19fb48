//go:build linux

package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"
)

// TestDocListsEveryFlag: the daemon's manual (doc.go, go doc's page)
// lists every flag kvallocd takes, each on a line of its own. Before, it
// listed none of the -l2 flags.
func TestDocListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	var f l2Flags
	parse([]string{"-h"}, &out, &f)
	flags := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1)
	if len(flags) < 40 {
		t.Fatalf("-h printed %d flags:\n%s", len(flags), out.String())
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range flags {
		if !regexp.MustCompile(`(?m)^//\t-` + regexp.QuoteMeta(m[1]) + `( |$)`).Match(doc) {
			t.Errorf("doc.go does not list -%s", m[1])
		}
	}
	t.Logf("%d flags, each listed in doc.go", len(flags))
}

// TestOperatingShowsVersionText: docs/OPERATING.md's sample of -version
// shows the protocol line the binary prints. Before, it showed
// "protocol 1" where the binary printed "protocol 1 to 2".
func TestOperatingShowsVersionText(t *testing.T) {
	doc, err := os.ReadFile("../../docs/OPERATING.md")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^protocol .*$`).FindString(versionText())
	got := regexp.MustCompile(`(?m)^protocol [0-9].*$`).FindString(string(doc))
	if want == "" || got != want {
		t.Fatalf("docs/OPERATING.md shows %q; kvallocd -version prints %q", got, want)
	}
}
