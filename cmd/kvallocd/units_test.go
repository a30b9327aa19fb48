//go:build linux

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// unitDir holds kvallocd.service and kvallocd.socket.
const unitDir = "../../dist/systemd"

// unit reads a unit file into its key=value lines, by key in order, and
// the commented lines.
func unit(t *testing.T, name string) (map[string][]string, []string) {
	data, err := os.ReadFile(filepath.Join(unitDir, name))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	var comments []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			comments = append(comments, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			keys[k] = append(keys[k], v)
		}
	}
	return keys, comments
}

// TestSystemdUnits: systemd-analyze verify accepts both units with no
// warning; the service is Type=notify with an fd store for the pool and
// its index, pins, and is hardened; its ExecReload (and the drop-in's) is
// its ExecStart with -takeover, under NotifyAccess=all; every kvallocd command line in it (the
// ExecStart and the drop-in its comment shows) parses with kvallocd's own
// flags; the socket is the daemon's default for root, in the service's
// runtime directory; and systemd-analyze security rates the service's
// exposure at most 4.0.
func TestSystemdUnits(t *testing.T) {
	svc, svcComments := unit(t, "kvallocd.service")
	sock, _ := unit(t, "kvallocd.socket")
	want := map[string]string{
		"Type": "notify", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "MemoryDenyWriteExecute": "yes", "LimitMEMLOCK": "infinity",
		"RuntimeDirectory": "kvallocd", "RuntimeDirectoryMode": "0755", "RuntimeDirectoryPreserve": "yes",
	}
	for k, v := range want {
		if got := svc[k]; len(got) != 1 || got[0] != v {
			t.Errorf("kvallocd.service: %s=%q, want %s=%s", k, got, k, v)
		}
	}
	if n, err := strconv.Atoi(strings.Join(svc["FileDescriptorStoreMax"], "")); err != nil || n < 2 {
		t.Errorf("kvallocd.service: FileDescriptorStoreMax=%q, want 2 or more (the pool and the index)", svc["FileDescriptorStoreMax"])
	}
	if af := strings.Fields(strings.Join(svc["RestrictAddressFamilies"], " ")); len(af) == 0 || af[0] != "AF_UNIX" {
		t.Errorf("kvallocd.service: RestrictAddressFamilies=%q, want AF_UNIX first", af)
	}

	listen := strings.Join(sock["ListenStream"], " ")
	if filepath.Dir(listen) != "/run/"+want["RuntimeDirectory"] {
		t.Errorf("kvallocd.socket: ListenStream=%s, not in the service's RuntimeDirectory /run/%s", listen, want["RuntimeDirectory"])
	}
	lines := append([]string(nil), svc["ExecStart"]...)
	for _, c := range svcComments {
		if strings.HasPrefix(c, "ExecStart=/") {
			lines = append(lines, strings.TrimPrefix(c, "ExecStart="))
		}
	}
	if len(lines) < 2 {
		t.Fatalf("kvallocd.service: want its ExecStart and the drop-in's example, got %q", lines)
	}
	// The reload route: ExecReload is ExecStart with -takeover, here and
	// in the drop-in's example, and the successor's MAINPID is accepted.
	reloads := append([]string(nil), svc["ExecReload"]...)
	for _, c := range svcComments {
		if strings.HasPrefix(c, "ExecReload=/") {
			reloads = append(reloads, strings.TrimPrefix(c, "ExecReload="))
		}
	}
	if len(reloads) != 2 {
		t.Errorf("kvallocd.service: want an ExecReload and the drop-in's, got %q", reloads)
	}
	for i, line := range reloads {
		f := strings.Fields(line)
		var errOut bytes.Buffer
		cfg, _, err := parse(f[1:], &errOut, new(l2Flags))
		if err != nil || !cfg.Takeover {
			t.Errorf("ExecReload %q: not a kvallocd -takeover (%v)", line, err)
			continue
		}
		if i < len(lines) {
			if strings.Join(strings.Fields(strings.Replace(line, " -takeover", "", 1))[1:], " ") != strings.Join(strings.Fields(lines[i])[1:], " ") {
				t.Errorf("ExecReload %q is not ExecStart %q with -takeover", line, lines[i])
			}
		}
	}
	if got := svc["NotifyAccess"]; len(got) != 1 || got[0] != "all" {
		t.Errorf("kvallocd.service: NotifyAccess=%q, want all (the reload's successor sends MAINPID=)", got)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 || filepath.Base(f[0]) != "kvallocd" {
			t.Errorf("ExecStart %q does not run kvallocd", line)
			continue
		}
		var errOut bytes.Buffer
		cfg, _, err := parse(f[1:], &errOut, new(l2Flags))
		if err != nil {
			t.Errorf("ExecStart %q: kvallocd refuses its flags: %v", line, err)
			continue
		}
		if cfg.SocketPath != listen {
			t.Errorf("ExecStart %q serves %s, kvallocd.socket listens on %s", line, cfg.SocketPath, listen)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		analyze = "/usr/bin/systemd-analyze"
		if _, err := os.Stat(analyze); err != nil {
			t.Fatalf("systemd-analyze not found (Debian: apt-get install systemd): the units cannot be verified: %v", err)
		}
	}
	// verify wants ExecStart's binary to exist: point it at this test
	// binary in a copy.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"kvallocd.service", "kvallocd.socket"} {
		data, err := os.ReadFile(filepath.Join(unitDir, name))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("ExecStart=/usr/local/bin/kvallocd "), []byte("ExecStart="+exe+" "))
		data = bytes.ReplaceAll(data, []byte("ExecReload=/usr/local/bin/kvallocd "), []byte("ExecReload="+exe+" "))
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, "kvallocd.socket"), filepath.Join(dir, "kvallocd.service")).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The hardening as systemd scores it: an exposure of at most 4.0 of
	// 10 (the units' is 3.4 under systemd 252).
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=40", "--no-pager", filepath.Join(dir, "kvallocd.service")).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: exposure above 4.0, or it failed: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "Overall exposure") {
			t.Log(strings.TrimSpace(line))
		}
	}
}
