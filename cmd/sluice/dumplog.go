package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/batch"
)

const dumpLogUsage = `usage: sluice dump-log --files FILE[,FILE...] [--print-data-log] [--offsets FROM-TO]

Prints the batches of log segment files (NNNNNNNNNNNNNNNNNNNN.log in a
partition's directory), as Kafka's kafka-dump-log.sh does: offsets,
producer id and epoch, sequences, leader epoch, transactional and control
flags, and the transaction marker of a control batch. It reads the files
directly and needs no broker; run it on a stopped broker's data or on a
copy (a segment being written may end in a partial batch, reported as
such). --print-data-log also prints each record's key and value.
`

// dumpLogCmd implements sluice dump-log.
func dumpLogCmd(args []string) error {
	fs := flag.NewFlagSet("dump-log", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), dumpLogUsage) }
	files := fs.String("files", "", "comma-separated segment files (.log)")
	data := fs.Bool("print-data-log", false, "print each record's key and value")
	offsets := fs.String("offsets", "", "only batches overlapping FROM-TO (inclusive)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *files == "" || fs.NArg() != 0 {
		return usageErrorf(dumpLogUsage, "dump-log needs --files and no arguments")
	}
	from, to := int64(0), int64(1<<63-1)
	if *offsets != "" {
		a, b, ok := strings.Cut(*offsets, "-")
		var err1, err2 error
		from, err1 = strconv.ParseInt(a, 10, 64)
		to, err2 = strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || from > to {
			return usageErrorf(dumpLogUsage, "--offsets wants FROM-TO, got %q", *offsets)
		}
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, f := range strings.Split(*files, ",") {
		if !strings.HasSuffix(f, ".log") {
			return fmt.Errorf("%s: only segment files (.log) are supported", f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "Dumping %s\n", f)
		dumpSegment(w, b, *data, from, to)
	}
	return nil
}

// dumpSegment prints the batches of segment contents b that overlap
// [from, to].
func dumpSegment(w io.Writer, b []byte, data bool, from, to int64) {
	pos := 0
	for len(b) > 0 {
		h, whole, rest, err := batch.Next(b)
		if err != nil {
			fmt.Fprintf(w, "position: %d: %v (%d bytes left unread)\n", pos, err, len(b))
			return
		}
		if h.LastOffset() >= from && h.BaseOffset <= to {
			dumpBatch(w, h, whole, pos, data)
		}
		pos += len(whole)
		b = rest
	}
}

func dumpBatch(w io.Writer, h batch.Header, whole []byte, pos int, data bool) {
	valid := batch.CheckCRC(whole) == nil
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t position: %d CreateTime: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		h.BaseOffset, h.LastOffset(), h.NumRecords, h.BaseSequence, h.LastSequence(), h.ProducerID, h.ProducerEpoch,
		h.LeaderEpoch, h.IsTransactional(), h.IsControl(), pos, h.MaxTimestamp, len(whole), h.Magic, h.Compression(), h.CRC, valid)
	if h.IsControl() {
		if m, err := batch.ParseMarker(whole); err == nil {
			kind := "ABORT"
			if m.Commit {
				kind = "COMMIT"
			}
			fmt.Fprintf(w, "| offset: %d endTxnMarker: %s coordinatorEpoch: %d\n", h.BaseOffset, kind, m.CoordinatorEpoch)
		} else {
			fmt.Fprintf(w, "| offset: %d control batch: %v\n", h.BaseOffset, err)
		}
		return
	}
	if !data {
		return
	}
	err := batch.Records(whole, func(r batch.Record) bool {
		fmt.Fprintf(w, "| offset: %d keySize: %d valueSize: %d key: %s payload: %s\n",
			h.BaseOffset+int64(r.OffsetDelta), len(r.Key), len(r.Value), printable(r.Key), printable(r.Value))
		return true
	})
	if err != nil {
		fmt.Fprintf(w, "| records: %v\n", err)
	}
}

// printable quotes b when it is not plain printable text; nil prints as
// null.
func printable(b []byte) string {
	if b == nil {
		return "null"
	}
	s := string(b)
	if strconv.CanBackquote(s) && !strings.ContainsAny(s, " \t") {
		return s
	}
	return strconv.Quote(s)
}
