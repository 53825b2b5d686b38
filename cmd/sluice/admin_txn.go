package main

// sluice txn: Kafka's kafka-transactions.sh (KIP-664): list and describe
// transactions, the producers of partitions with their open transactions
// (find-hanging's data), and abort a hanging transaction by writing its
// ABORT marker to the partition (WriteTxnMarkers, as the Java Admin's
// abortTransaction does; it needs CLUSTER_ACTION).

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// txnUsage is the usage text of `sluice txn`.
const txnUsage = `usage:
  sluice txn list
  sluice txn describe ID...
  sluice txn producers --topic T [--partition P]
  sluice txn abort --topic T --partition P --start-offset N

list names every transactional id with its producer id and state.
describe shows a transactional id's state, epoch, timeout, start and the
partitions of its transaction. producers lists, per partition of T, the
producers its leader tracks and the first offset of each one's open
transaction (-1: none): a transaction open long after its start is a
hanging one, which holds the partition's last stable offset (and every
read_committed consumer) back. abort writes the ABORT marker for the
transaction that began at --start-offset in T-P, using the producer id,
epoch and coordinator epoch the partition reports (kafka-transactions.sh
abort --start-offset); the transaction's records then stay invisible to
read_committed consumers and the last stable offset moves on.
`

func txnCmd(args []string) error {
	return subcommand("txn", txnUsage, args, map[string]func([]string) error{
		"list":      txnList,
		"describe":  txnDescribe,
		"producers": txnProducers,
		"abort":     txnAbort,
	})
}

func txnList(args []string) error {
	fs, o := newFlags("txn list", txnUsage)
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(txnUsage, "txn list takes no arguments")
	}
	ctx, cancel := o.context()
	defer cancel()
	cl, adm, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	lts, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return err
	}
	type txn struct {
		ID          string `json:"transactional_id"`
		ProducerID  int64  `json:"producer_id"`
		State       string `json:"state"`
		Coordinator int32  `json:"coordinator"`
	}
	out := struct {
		Transactions []txn `json:"transactions"`
	}{Transactions: []txn{}}
	for _, t := range lts.Sorted() {
		out.Transactions = append(out.Transactions, txn{t.TxnID, t.ProducerID, t.State, t.Coordinator})
	}
	return o.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE\tCOORDINATOR")
		for _, t := range out.Transactions {
			fmt.Fprintf(w, "%s\t%d\t%s\t%d\n", t.ID, t.ProducerID, t.State, t.Coordinator)
		}
	})
}

func txnDescribe(args []string) error {
	fs, o := newFlags("txn describe", txnUsage)
	ids, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usageErrorf(txnUsage, "txn describe needs transactional ids")
	}
	ctx, cancel := o.context()
	defer cancel()
	cl, adm, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	dts, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		return err
	}
	type txn struct {
		ID            string   `json:"transactional_id"`
		State         string   `json:"state"`
		ProducerID    int64    `json:"producer_id"`
		ProducerEpoch int16    `json:"producer_epoch"`
		TimeoutMs     int32    `json:"timeout_ms"`
		Start         string   `json:"start,omitempty"`
		Partitions    []string `json:"partitions"`
		Coordinator   int32    `json:"coordinator"`
		Error         string   `json:"error,omitempty"`
	}
	out := struct {
		Transactions []txn `json:"transactions"`
	}{Transactions: []txn{}}
	for _, id := range ids {
		d, ok := dts[id]
		t := txn{ID: id, Partitions: []string{}}
		switch {
		case !ok:
			t.Error = "not described"
		case d.Err != nil:
			t.Error = d.Err.Error()
		default:
			t.State, t.ProducerID, t.ProducerEpoch, t.TimeoutMs, t.Coordinator = d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, d.Coordinator
			if d.StartTimestamp > 0 {
				t.Start = time.UnixMilli(d.StartTimestamp).UTC().Format(time.RFC3339)
			}
			for _, tp := range d.Topics.Sorted() {
				for _, p := range tp.Partitions {
					t.Partitions = append(t.Partitions, fmt.Sprintf("%s-%d", tp.Topic, p))
				}
			}
		}
		out.Transactions = append(out.Transactions, t)
	}
	return o.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "TRANSACTIONAL-ID\tSTATE\tPRODUCER-ID\tEPOCH\tTIMEOUT-MS\tSTART\tPARTITIONS\tERROR")
		for _, t := range out.Transactions {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%v\t%s\n", t.ID, t.State, t.ProducerID, t.ProducerEpoch, t.TimeoutMs, t.Start, t.Partitions, t.Error)
		}
	})
}

// producerRow is one producer of one partition.
type producerRow struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	LastSequence     int32  `json:"last_sequence"`
	LastTimestamp    int64  `json:"last_timestamp"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	TxnStartOffset   int64  `json:"current_txn_start_offset"`
}

// producerFlags are the flags of txn producers and txn abort.
type producerFlags struct {
	topic       string
	partition   int32 // -1: all
	startOffset int64 // -1: none given
}

// describeProducers lists the producers of --topic (one partition if
// --partition is given).
func describeProducers(args []string, name string) ([]producerRow, *adminOpts, producerFlags, error) {
	var pf producerFlags
	fs, o := newFlags(name, txnUsage)
	topic := fs.String("topic", "", "topic")
	partition := fs.Int("partition", -1, "partition (default: all)")
	startOffset := fs.Int64("start-offset", -1, "first offset of the transaction to abort")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return nil, nil, pf, err
	}
	if len(pos) != 0 || *topic == "" {
		return nil, nil, pf, usageErrorf(txnUsage, "%s needs --topic", name)
	}
	pf = producerFlags{*topic, int32(*partition), *startOffset}
	ctx, cancel := o.context()
	defer cancel()
	cl, adm, err := o.connect(ctx)
	if err != nil {
		return nil, nil, pf, err
	}
	defer cl.Close()
	td, err := requireTopics(ctx, adm, *topic)
	if err != nil {
		return nil, nil, pf, err
	}
	set := kadm.TopicsSet{}
	for p := range td[*topic].Partitions {
		if *partition < 0 || p == int32(*partition) {
			set.Add(*topic, p)
		}
	}
	if len(set) == 0 {
		return nil, nil, pf, fmt.Errorf("topic %s has no partition %d", *topic, *partition)
	}
	dps, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, nil, pf, err
	}
	var rows []producerRow
	var perr error
	dps.EachPartition(func(dp kadm.DescribedProducersPartition) {
		if dp.Err != nil && perr == nil {
			perr = fmt.Errorf("describing the producers of %s-%d: %w", dp.Topic, dp.Partition, dp.Err)
		}
	})
	if perr != nil {
		return nil, nil, pf, perr
	}
	dps.EachPartition(func(dp kadm.DescribedProducersPartition) {
		for _, p := range dp.ActiveProducers.Sorted() {
			rows = append(rows, producerRow{dp.Topic, dp.Partition, p.ProducerID, p.ProducerEpoch, p.LastSequence,
				p.LastTimestamp, p.CoordinatorEpoch, p.CurrentTxnStartOffset})
		}
	})
	return rows, o, pf, nil
}

func txnProducers(args []string) error {
	rows, o, _, err := describeProducers(args, "txn producers")
	if err != nil {
		return err
	}
	out := struct {
		Producers []producerRow `json:"producers"`
	}{Producers: append([]producerRow{}, rows...)}
	return o.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "TOPIC\tPARTITION\tPRODUCER-ID\tEPOCH\tLAST-SEQUENCE\tLAST-TIMESTAMP\tCOORDINATOR-EPOCH\tTXN-START-OFFSET")
		for _, r := range out.Producers {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Topic, r.Partition, r.ProducerID, r.ProducerEpoch,
				r.LastSequence, r.LastTimestamp, r.CoordinatorEpoch, r.TxnStartOffset)
		}
	})
}

func txnAbort(args []string) error {
	rows, o, pf, err := describeProducers(args, "txn abort")
	if err != nil {
		return err
	}
	if pf.partition < 0 || pf.startOffset < 0 {
		return usageErrorf(txnUsage, "txn abort needs --partition and --start-offset")
	}
	var found *producerRow
	for i := range rows {
		if rows[i].Partition == pf.partition && rows[i].TxnStartOffset == pf.startOffset {
			found = &rows[i]
		}
	}
	if found == nil {
		return fmt.Errorf("no open transaction begins at offset %d of %s-%d (see sluice txn producers)", pf.startOffset, pf.topic, pf.partition)
	}
	ctx, cancel := o.context()
	defer cancel()
	cl, adm, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	set := kadm.TopicsSet{}
	set.Add(found.Topic, found.Partition)
	resps, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: found.ProducerID, ProducerEpoch: found.ProducerEpoch,
		CoordinatorEpoch: found.CoordinatorEpoch, Topics: set})
	if err != nil {
		return err
	}
	for _, r := range resps {
		for _, tr := range r.Topics {
			for _, pr := range tr.Partitions {
				if pr.Err != nil {
					return fmt.Errorf("writing the ABORT marker to %s-%d: %w", tr.Topic, pr.Partition, pr.Err)
				}
			}
		}
	}
	out := struct {
		Aborted producerRow `json:"aborted"`
	}{*found}
	return o.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "aborted the transaction of producer %d (epoch %d) that began at %s-%d@%d\n",
			found.ProducerID, found.ProducerEpoch, found.Topic, found.Partition, found.TxnStartOffset)
	})
}
