package admin

// sluice txn: Kafka's kafka-transactions.sh (KIP-664): list and describe
// transactions, the producers of partitions with their open transactions
// (find-hanging's data), and abort a hanging transaction by writing its
// ABORT marker to the partition (WriteTxnMarkers, as the Java Admin's
// abortTransaction does; it needs CLUSTER_ACTION).

import (
	"context"
	"flag"
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
read_committed consumers and the last stable offset moves on. describe's
ids may also be given as --transactional-id ID (kafka-transactions.sh).
`

func (c *cli) txnCmd(args []string) error {
	return c.subcommand("txn", txnUsage, args, map[string]func([]string) error{
		"list":      c.txnList,
		"describe":  c.txnDescribe,
		"producers": c.txnProducers,
		"abort":     c.txnAbort,
	})
}

func (c *cli) txnList(args []string) error {
	fs, o := c.newFlags("txn list", txnUsage)
	return runAdmin(fs, o, args, noArgs(txnUsage, "txn list"), func(ctx context.Context, adm *kadm.Client, _ []string) error {
		return txnListRun(ctx, adm, o)
	})
}

func txnListRun(ctx context.Context, adm *kadm.Client, o *adminOpts) error {
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

func (c *cli) txnDescribe(args []string) error {
	fs, o := c.newFlags("txn describe", txnUsage)
	o.posFlag(fs, "transactional-id")
	needIDs := func(ids []string) error {
		if len(ids) == 0 {
			return usageErrorf(txnUsage, "txn describe needs transactional ids")
		}
		return nil
	}
	return runAdmin(fs, o, args, needIDs, func(ctx context.Context, adm *kadm.Client, ids []string) error {
		return txnDescribeRun(ctx, adm, o, ids)
	})
}

func txnDescribeRun(ctx context.Context, adm *kadm.Client, o *adminOpts, ids []string) error {
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
	partition   int // -1: all
	startOffset int64
	// check is runAdmin's check of the positional arguments and --topic.
	check func(pos []string) error
}

// newProducerFlags registers them on a new flag set for command name.
func (c *cli) newProducerFlags(name string) (*flag.FlagSet, *adminOpts, *producerFlags) {
	fs, o := c.newFlags(name, txnUsage)
	pf := &producerFlags{}
	fs.StringVar(&pf.topic, "topic", "", "topic")
	fs.IntVar(&pf.partition, "partition", -1, "partition (default: all)")
	fs.Int64Var(&pf.startOffset, "start-offset", -1, "first offset of the transaction to abort")
	pf.check = func(pos []string) error {
		if len(pos) != 0 || pf.topic == "" {
			return usageErrorf(txnUsage, "%s needs --topic", name)
		}
		return nil
	}
	return fs, o, pf
}

// describeProducers lists the producers of pf's topic (one partition if
// --partition is given).
func describeProducers(ctx context.Context, adm *kadm.Client, pf *producerFlags) ([]producerRow, error) {
	td, err := requireTopics(ctx, adm, pf.topic)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for p := range td[pf.topic].Partitions {
		if pf.partition < 0 || p == int32(pf.partition) {
			set.Add(pf.topic, p)
		}
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("topic %s has no partition %d", pf.topic, pf.partition)
	}
	dps, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	var rows []producerRow
	var perr error
	dps.EachPartition(func(dp kadm.DescribedProducersPartition) {
		if dp.Err != nil && perr == nil {
			perr = fmt.Errorf("describing the producers of %s-%d: %w", dp.Topic, dp.Partition, dp.Err)
		}
		for _, p := range dp.ActiveProducers.Sorted() {
			rows = append(rows, producerRow{dp.Topic, dp.Partition, p.ProducerID, p.ProducerEpoch, p.LastSequence,
				p.LastTimestamp, p.CoordinatorEpoch, p.CurrentTxnStartOffset})
		}
	})
	return rows, perr
}

func (c *cli) txnProducers(args []string) error {
	fs, o, pf := c.newProducerFlags("txn producers")
	return runAdmin(fs, o, args, pf.check, func(ctx context.Context, adm *kadm.Client, _ []string) error {
		rows, err := describeProducers(ctx, adm, pf)
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
	})
}

func (c *cli) txnAbort(args []string) error {
	fs, o, pf := c.newProducerFlags("txn abort")
	check := func(pos []string) error {
		if err := pf.check(pos); err != nil {
			return err
		}
		if pf.partition < 0 || pf.startOffset < 0 {
			return usageErrorf(txnUsage, "txn abort needs --partition and --start-offset")
		}
		return nil
	}
	return runAdmin(fs, o, args, check, func(ctx context.Context, adm *kadm.Client, _ []string) error {
		return txnAbortRun(ctx, adm, o, pf)
	})
}

// txnAbortRun finds the producer whose transaction began at
// --start-offset and writes its ABORT marker, on one connection.
func txnAbortRun(ctx context.Context, adm *kadm.Client, o *adminOpts, pf *producerFlags) error {
	rows, err := describeProducers(ctx, adm, pf)
	if err != nil {
		return err
	}
	var found *producerRow
	for i := range rows {
		if rows[i].Partition == int32(pf.partition) && rows[i].TxnStartOffset == pf.startOffset {
			found = &rows[i]
		}
	}
	if found == nil {
		return fmt.Errorf("no open transaction begins at offset %d of %s-%d (see sluice txn producers)", pf.startOffset, pf.topic, pf.partition)
	}
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
