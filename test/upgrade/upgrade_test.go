// Package upgrade upgrades a running cluster in place, node by node, from
// a binary built at an earlier commit of this repository to this
// checkout's, under acks=all load, and then finalizes the feature level
// the new binary brings (kraft.version 1: dynamic voters).
package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// fromCommit is the earlier release the test upgrades from: main before
// features, meta.properties and dynamic voters existed. SLUICE_UPGRADE_FROM
// names another commit.
const fromCommit = "a0cb472"

// buildOld builds the sluice binary of commit into a temporary directory.
// It needs the repository's history: in a shallow clone or an export
// without .git the test is skipped, saying why.
func buildOld(t *testing.T, commit string) string {
	t.Helper()
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if _, err := git("cat-file", "-e", commit+"^{commit}"); err != nil {
		shallow, _ := git("rev-parse", "--is-shallow-repository")
		t.Skipf("commit %s is not in this checkout (shallow: %q): the rolling upgrade needs the repository's history (git clone without --depth)", commit, shallow)
	}
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar %s: %v", commit, err)
	}
	bin := filepath.Join(t.TempDir(), "sluice-"+commit)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", commit, err, out)
	}
	return bin
}

// kraftVersion returns the node's finalized kraft.version (ApiVersions).
func kraftVersion(t *testing.T, p *testproc.Proc) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, p.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "kraft.version" {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// updateKRaftVersion asks for kraft.version level and returns the
// feature's error code and message.
func updateKRaftVersion(t *testing.T, p *testproc.Proc, level int16) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "kraft.version", level, 1
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, p.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	c, msg := resp.ErrorCode, resp.ErrorMessage
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			c, msg = r.ErrorCode, r.ErrorMessage
		}
	}
	if msg == nil {
		return c, ""
	}
	return c, *msg
}

// TestRollingUpgrade: a 3-node cluster (RF 3, min ISR 2) of the earlier
// binary takes acks=all load; each node in turn is stopped (SIGTERM,
// controlled shutdown) and started again from this checkout's binary on
// the same data directory, waiting for full ISRs in between. No record
// fails, every acknowledged one is read back at its offset, and no
// partition goes without acknowledgements for longer than an election.
// While any node still runs the old binary, kraft.version stays 0 and
// cannot be finalized at 1 (the old node does not support it) and voter
// changes are refused; once all run the new binary it is finalized, and
// a voter change is accepted.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an earlier binary and runs real processes")
	}
	from := fromCommit
	if c := os.Getenv("SLUICE_UPGRADE_FROM"); c != "" {
		from = c
	}
	old := buildOld(t, from)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Binary: old, Props: map[string]string{
		"broker.session.timeout.ms":    "2000",
		"broker.heartbeat.interval.ms": "300",
		"min.insync.replicas":          "2",
		"auto.create.topics.enable":    "false",
	}})
	const topic, parts = "upgrade", 6
	c.CreateTopic(topic, parts, 3, nil, nil)
	var all []int32
	for p := range int32(parts) {
		all = append(all, p)
	}
	load := c.StartLoad(topic, testcluster.LoadOptions{Partitions: all, Rate: 200})
	start := time.Now()
	time.Sleep(2 * time.Second)

	fullISRs := func() (bool, string) {
		m, err := c.Meta(topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(parts) {
			if len(m[p].ISR) != 3 || m[p].Leader < 0 {
				return false, m[p].String()
			}
		}
		return true, ""
	}
	bin := testproc.Build(t)
	for i, n := range c.Nodes() {
		n.Stop()
		n.UseBinary(bin)
		n.Restart()
		testcluster.WaitFor(t, 60*time.Second, "full ISRs after upgrading node "+n.Name(), fullISRs)
		if i < len(c.Nodes())-1 {
			// A node still runs the old binary: the new level waits.
			if v := kraftVersion(t, n); v != 0 {
				t.Errorf("kraft.version %d with old nodes running, want 0", v)
			}
			// Refused: by a new active controller because an old node
			// does not support the level, or by an old one that does
			// not know the API.
			code, msg := updateKRaftVersion(t, n, 1)
			if !(code == kerr.InvalidUpdateVersion.Code && strings.Contains(msg, "do not support")) && code != kerr.UnsupportedVersion.Code {
				t.Errorf("finalizing kraft.version 1 with old nodes running: %v %q, want INVALID_UPDATE_VERSION or UNSUPPORTED_VERSION", kerr.ErrorForCode(code), msg)
			}
			t.Logf("finalizing kraft.version 1 with %d old nodes running: %v %s", len(c.Nodes())-1-i, kerr.ErrorForCode(code), msg)
			if v := kraftVersion(t, n); v != 0 {
				t.Errorf("kraft.version %d after the refused update", v)
			}
		}
		time.Sleep(time.Second)
	}

	// All nodes run the new binary: voter changes wait for the level.
	n1 := c.Node(1)
	rm := kmsg.NewPtrRemoveRaftVoterRequest()
	rm.VoterID = 9
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := rm.RequestWith(ctx, n1.Client(t)); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("a voter change before kraft.version 1: %v %+v, want UNSUPPORTED_VERSION", err, resp)
	}
	// Finalized with the CLI (kafka-features.sh upgrade; kadm's
	// UpdateFeatures), retried while the last node's registration
	// catches up with its binary's features.
	testcluster.WaitFor(t, 30*time.Second, "kraft.version 1 finalized", func() (bool, string) {
		out, err := exec.Command(bin, "feature", "upgrade", "--feature", "kraft.version=1", "--bootstrap", n1.Addr()).CombinedOutput()
		return err == nil, string(out)
	})
	out, err := exec.Command(bin, "feature", "describe", "--json", "--bootstrap", n1.Addr()).CombinedOutput()
	var desc struct {
		Features []struct {
			Feature   string `json:"feature"`
			Supported string `json:"supported"`
			Finalized int16  `json:"finalized"`
		} `json:"features"`
	}
	found := false
	if err == nil && json.Unmarshal(out, &desc) == nil {
		for _, f := range desc.Features {
			found = found || (f.Feature == "kraft.version" && f.Supported == "0-1" && f.Finalized == 1)
		}
	}
	if !found {
		t.Errorf("sluice feature describe: %v\n%s", err, out)
	}
	for _, n := range c.Nodes() {
		testcluster.WaitFor(t, 10*time.Second, "kraft.version 1 on "+n.Name(), func() (bool, string) {
			v := kraftVersion(t, n)
			return v == 1, fmt.Sprintf("level %d", v)
		})
	}
	if code, _ := updateKRaftVersion(t, n1, 0); code != kerr.InvalidUpdateVersion.Code {
		t.Errorf("kraft.version back to 0: %v, want INVALID_UPDATE_VERSION", kerr.ErrorForCode(code))
	}
	if resp, err := rm.RequestWith(ctx, n1.Client(t)); err != nil || resp.ErrorCode != kerr.VoterNotFound.Code {
		t.Errorf("a voter change after kraft.version 1: %v %+v, want VOTER_NOT_FOUND (accepted and checked)", err, resp)
	}

	time.Sleep(2 * time.Second)
	load.Stop(30 * time.Second)
	t.Log(load.Summary())
	if n, v, err := load.Failures(); n > 0 {
		t.Errorf("%d records failed across the upgrade, e.g. %s: %v", n, v, err)
	}
	for p := range int32(parts) {
		if gap, at := load.MaxGap(p, start, time.Time{}); gap > 5*time.Second {
			t.Errorf("partition %d went %v without an acknowledgement (until %v)", p, gap.Round(time.Millisecond), at.Format("15:04:05.000"))
		}
	}
	acked := load.Acked()
	testcluster.CheckAcked(t, "after the rolling upgrade", acked, c.ConsumeAll(topic, parts, time.Minute))
	t.Logf("upgraded from %s: %d acknowledged records read back", from, len(acked))
}
