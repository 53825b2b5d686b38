package handler

// DescribeLogDirs, versions 0-4. One log directory (the data dir) holding
// every partition, with each partition's size in bytes; v4 adds the
// directory's total and usable bytes. A null topic list means all topics.
// With an authorizer the caller needs DESCRIBE on the cluster
// (KafkaApis.handleDescribeLogDirsRequest): refused, the answer has no
// directory and, from v3, CLUSTER_AUTHORIZATION_FAILED.

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) describeLogDirs(r *protocol.Request) protocol.Reply {
	lookup := h.b.LookupDeadline()
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !h.allowedCluster(r, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return protocol.Reply{Resp: resp}
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, _ = filepath.Abs(h.b.Config().DataDir)
	dir.TotalBytes, dir.UsableBytes = diskSpace(h.b.Config().DataDir)
	img := h.b.Image()
	type want struct {
		topic string
		parts []int32
	}
	var wants []want
	if req.Topics == nil {
		for _, name := range img.TopicNames() {
			t := img.Topics[name]
			w := want{topic: name}
			for _, p := range t.Partitions {
				w.parts = append(w.parts, p.Index)
			}
			wants = append(wants, w)
		}
	} else {
		for _, t := range req.Topics {
			wants = append(wants, want{t.Topic, t.Partitions})
		}
	}
	for _, w := range wants {
		st := kmsg.NewDescribeLogDirsResponseDirTopic()
		st.Topic = w.topic
		for _, idx := range w.parts {
			p, err := h.b.PartitionBy(w.topic, idx, lookup)
			if err != nil {
				continue
			}
			sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			sp.Partition = idx
			sp.Size = p.Log().Size()
			sp.OffsetLag = p.LogEndOffset() - p.HighWatermark()
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			dir.Topics = append(dir.Topics, st)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return protocol.Reply{Resp: resp}
}
