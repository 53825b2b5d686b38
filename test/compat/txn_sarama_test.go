package compat

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaTxnVersions are the protocol versions the transactional producer
// is tried with. sarama picks each API's version from its Config.Version
// and lowers it to the broker's advertised maximum, which sluice's ranges
// do not need here.
var saramaTxnVersions = []struct {
	name string
	v    sarama.KafkaVersion
}{
	// The library default: InitProducerId v4 (PRODUCER_FENCED), flexible
	// AddPartitionsToTxn v3 and EndTxn v3, Produce v9.
	{"V2_8_0_0", sarama.V2_8_0_0},
	// Non-flexible: InitProducerId v1, AddPartitionsToTxn v1, EndTxn v1,
	// Produce v7.
	{"V2_1_0_0", sarama.V2_1_0_0},
	// The first version with transactions: every transactional API at
	// v0, Produce v3.
	{"V0_11_0_0", sarama.V0_11_0_0},
}

// TestTxnSarama: sarama's transactional SyncProducer (Transaction.ID,
// Idempotent, acks=all, one request in flight) runs txnPlan against a
// 3-node cluster with each of saramaTxnVersions: BeginTxn, one SendMessage
// per record to an explicit partition, AddOffsetsToTxn (the group's
// offset), then CommitTxn or AbortTxn.
// checkTxnTopic then reads the topic back at both isolation levels.
func TestTxnSarama(t *testing.T) {
	c := startTxnCluster(t)
	topics := map[string]string{}
	for _, ver := range saramaTxnVersions {
		topics[ver.name] = createTxnTopic(t, c)
	}
	for _, ver := range saramaTxnVersions {
		t.Run(ver.name, func(t *testing.T) {
			topic := topics[ver.name]
			txnID := topic + "-txn"
			prefix := "sarama-" + ver.name
			produceTxnSarama(t, c.Addrs(false), ver.v, topic, txnID, prefix)
			checkTxnTopic(t, c, topic, txnID, prefix)
		})
	}
}

// produceTxnSarama runs txnPlan with a transactional SyncProducer.
func produceTxnSarama(t *testing.T, addrs []string, v sarama.KafkaVersion, topic, txnID, prefix string) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "sluice-compat-sarama-txn"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 15 * time.Second
	cfg.Net.WriteTimeout = 15 * time.Second
	cfg.Net.MaxOpenRequests = 1
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Timeout = 10 * time.Second

	p, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer (transactional): %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	if !p.IsTransactional() {
		t.Fatal("sarama producer with Transaction.ID is not transactional")
	}
	for si, s := range txnPlan {
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn %s: %v (status %v)", s.Name, err, p.TxnStatus())
		}
		for part := range int32(txnPartitions) {
			for i := range txnPerPartition {
				m := &sarama.ProducerMessage{Topic: topic, Partition: part,
					Key: sarama.StringEncoder(txnKey(s.Name, part, i)), Value: sarama.StringEncoder(txnValue(prefix, s.Name, part, i))}
				gp, off, err := p.SendMessage(m)
				if err != nil {
					t.Fatalf("SendMessage %s p%d #%d: %v (status %v)", s.Name, part, i, err, p.TxnStatus())
				}
				if wantOff := txnRecordOffset(si, i); gp != part || off != wantOff {
					t.Fatalf("SendMessage %s p%d #%d: acked at partition %d offset %d, want %d offset %d", s.Name, part, i, gp, off, part, wantOff)
				}
			}
		}
		offs := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: int32(si % txnPartitions), Offset: txnGroupOffset(si), LeaderEpoch: -1}}}
		if err := p.AddOffsetsToTxn(offs, txnGroup(txnID)); err != nil {
			t.Fatalf("AddOffsetsToTxn %s: %v (status %v)", s.Name, err, p.TxnStatus())
		}
		end, endName := p.CommitTxn, "CommitTxn"
		if !s.Commit {
			end, endName = p.AbortTxn, "AbortTxn"
		}
		if err := end(); err != nil {
			t.Fatalf("%s %s: %v (status %v)", endName, s.Name, err, p.TxnStatus())
		}
		if st := p.TxnStatus(); st != sarama.ProducerTxnFlagReady {
			t.Fatalf("after %s %s: status %v, want %v", endName, s.Name, st, sarama.ProducerTxnFlagReady)
		}
	}
	closed = true
	if err := p.Close(); err != nil {
		t.Fatalf("sarama SyncProducer.Close: %v", err)
	}
}
