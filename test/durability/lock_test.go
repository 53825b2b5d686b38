package durability

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestSecondServeOnOneDataDir starts a second `sluice serve` on a data
// directory a running broker holds: the second exits non-zero at once
// naming the directory and the holder's pid, the first keeps serving, and
// every record acknowledged before and after is read back after a SIGKILL
// and restart of the first (Kafka's log-dir .lock).
func TestSecondServeOnOneDataDir(t *testing.T) {
	p := testproc.Start(t, testproc.Options{})
	const topic = "locked"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produce := func(from, to int) {
		t.Helper()
		cl := p.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.AllowAutoTopicCreation())
		defer cl.Close()
		for i := from; i < to; i++ {
			r := &kgo.Record{Value: []byte(strconv.Itoa(i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
			if r.Offset != int64(i) {
				t.Fatalf("record %d acknowledged at offset %d", i, r.Offset)
			}
		}
	}
	produce(0, 50)

	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	second := exec.CommandContext(ctx, testproc.Build(t), "serve", "--data-dir", p.DataDir(),
		"--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--http", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	var stderr bytes.Buffer
	second.Stderr = &stderr
	t0 := time.Now()
	err = second.Run()
	if err == nil {
		t.Fatalf("second serve on %s exited 0:\n%s", p.DataDir(), stderr.String())
	}
	want := fmt.Sprintf("data directory %s is in use by pid %d", p.DataDir(), p.Pid())
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("second serve: %v; stderr lacks %q:\n%s", err, want, stderr.String())
	}
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("second serve took %v to fail", took)
	}

	produce(50, 100) // the first still serves
	p.Kill()
	p.Restart()
	cl := p.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for next := 0; next < 100; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 100: %v", next, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		for _, r := range fs.Records() {
			if r.Offset != int64(next) || string(r.Value) != strconv.Itoa(next) {
				t.Fatalf("offset %d holds %q, want %d", r.Offset, r.Value, next)
			}
			next++
		}
	}
}
