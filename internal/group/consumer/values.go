package consumer

// GroupMetadataValue is ConsumerGroupMetadataValue: the group epoch, and
// (Kafka 4.1, KIP-1101, tagged field 0) the hash of the subscribed topics'
// metadata.
type GroupMetadataValue struct {
	Epoch        int32
	MetadataHash int64
}

func (*GroupMetadataValue) recordType() int16 { return TypeGroupMetadata }

func (v *GroupMetadataValue) encode(w *writer) {
	w.i32(v.Epoch)
	var tags []tagged
	if v.MetadataHash != 0 {
		t := &writer{}
		t.i64(v.MetadataHash)
		tags = append(tags, tagged{0, t.b})
	}
	w.tags(tags)
}

func (v *GroupMetadataValue) decode(r *reader) {
	v.Epoch = r.i32()
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.MetadataHash = sub.i64()
		if len(sub.b) != 0 {
			sub.fail(errInvalid)
		}
		return true
	})
}

// TopicMetadata is one topic of a ConsumerGroupPartitionMetadataValue.
// PartitionRacks is deprecated in Kafka 4.0 and written empty.
type TopicMetadata struct {
	TopicID        [16]byte
	TopicName      string
	NumPartitions  int32
	PartitionRacks []PartitionRacks
}

// PartitionRacks is one partition's racks in a TopicMetadata.
type PartitionRacks struct {
	Partition int32
	Racks     []string
}

// PartitionMetadataValue is ConsumerGroupPartitionMetadataValue: the
// metadata of the topics the group subscribes to, as of its last epoch
// bump.
type PartitionMetadataValue struct {
	Topics []TopicMetadata
}

func (*PartitionMetadataValue) recordType() int16 { return TypePartitionMetadata }

func (v *PartitionMetadataValue) encode(w *writer) {
	w.carr(len(v.Topics))
	for _, t := range v.Topics {
		w.uuid(t.TopicID)
		w.cstr(t.TopicName)
		w.i32(t.NumPartitions)
		w.carr(len(t.PartitionRacks))
		for _, p := range t.PartitionRacks {
			w.i32(p.Partition)
			w.cstrs(p.Racks)
			w.tags(nil)
		}
		w.tags(nil)
	}
	w.tags(nil)
}

func (v *PartitionMetadataValue) decode(r *reader) {
	n := r.carr(16 + 1 + 4 + 1 + 1)
	for range n {
		var t TopicMetadata
		t.TopicID = r.uuid()
		t.TopicName = r.cstr()
		t.NumPartitions = r.i32()
		np := r.carr(4 + 1 + 1)
		for range np {
			var p PartitionRacks
			p.Partition = r.i32()
			p.Racks = r.cstrs()
			r.tags(nil)
			t.PartitionRacks = append(t.PartitionRacks, p)
		}
		r.tags(nil)
		v.Topics = append(v.Topics, t)
	}
	r.tags(nil)
}

// ClassicProtocol is one protocol a classic-protocol member supports.
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// ClassicMemberMetadata is the member metadata's tagged field 0, set for a
// member that speaks the classic protocol inside a consumer group.
type ClassicMemberMetadata struct {
	SessionTimeoutMs   int32
	SupportedProtocols []ClassicProtocol
}

// MemberMetadataValue is ConsumerGroupMemberMetadataValue: a member's
// subscription and client information.
type MemberMetadataValue struct {
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
	Classic              *ClassicMemberMetadata
}

func (*MemberMetadataValue) recordType() int16 { return TypeMemberMetadata }

func (v *MemberMetadataValue) encode(w *writer) {
	w.cnstr(v.InstanceID)
	w.cnstr(v.RackID)
	w.cstr(v.ClientID)
	w.cstr(v.ClientHost)
	w.cstrs(v.SubscribedTopicNames)
	w.cnstr(v.SubscribedTopicRegex)
	w.i32(v.RebalanceTimeoutMs)
	w.cnstr(v.ServerAssignor)
	var tags []tagged
	if c := v.Classic; c != nil {
		// A nullable struct in a tagged field starts with a uvarint
		// presence marker (1), as Kafka's MessageDataGenerator writes it.
		t := &writer{}
		t.uvarint(1)
		t.i32(c.SessionTimeoutMs)
		t.carr(len(c.SupportedProtocols))
		for _, p := range c.SupportedProtocols {
			t.cstr(p.Name)
			t.cbytes(p.Metadata)
			t.tags(nil)
		}
		t.tags(nil)
		tags = append(tags, tagged{0, t.b})
	}
	w.tags(tags)
}

func (v *MemberMetadataValue) decode(r *reader) {
	v.InstanceID = r.cnstr()
	v.RackID = r.cnstr()
	v.ClientID = r.cstr()
	v.ClientHost = r.cstr()
	v.SubscribedTopicNames = r.cstrs()
	v.SubscribedTopicRegex = r.cnstr()
	v.RebalanceTimeoutMs = r.i32()
	v.ServerAssignor = r.cnstr()
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		// A nullable struct in a tagged field: a uvarint presence
		// marker, 0 for null.
		if sub.uvarint() == 0 {
			return true
		}
		c := &ClassicMemberMetadata{}
		c.SessionTimeoutMs = sub.i32()
		n := sub.carr(3)
		for range n {
			var p ClassicProtocol
			p.Name = sub.cstr()
			p.Metadata = sub.cbytes()
			sub.tags(nil)
			c.SupportedProtocols = append(c.SupportedProtocols, p)
		}
		sub.tags(nil)
		if err := sub.done(); err != nil {
			sub.fail(err)
			return true
		}
		v.Classic = c
		return true
	})
}

// TargetAssignmentMetadataValue is ConsumerGroupTargetAssignmentMetadataValue:
// the epoch of the group's target assignment.
type TargetAssignmentMetadataValue struct {
	AssignmentEpoch int32
}

func (*TargetAssignmentMetadataValue) recordType() int16 { return TypeTargetAssignmentMetadata }

func (v *TargetAssignmentMetadataValue) encode(w *writer) {
	w.i32(v.AssignmentEpoch)
	w.tags(nil)
}

func (v *TargetAssignmentMetadataValue) decode(r *reader) {
	v.AssignmentEpoch = r.i32()
	r.tags(nil)
}

// TopicPartitions is a topic id and some of its partitions.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

func encodeTPs(w *writer, tps []TopicPartitions) {
	w.carr(len(tps))
	for _, tp := range tps {
		w.uuid(tp.TopicID)
		w.ci32s(tp.Partitions)
		w.tags(nil)
	}
}

func decodeTPs(r *reader) []TopicPartitions {
	n := r.carr(16 + 1 + 1)
	var out []TopicPartitions
	for range n {
		var tp TopicPartitions
		tp.TopicID = r.uuid()
		tp.Partitions = r.ci32s()
		r.tags(nil)
		out = append(out, tp)
	}
	return out
}

// TargetAssignmentMemberValue is ConsumerGroupTargetAssignmentMemberValue:
// a member's partitions in the target assignment.
type TargetAssignmentMemberValue struct {
	TopicPartitions []TopicPartitions
}

func (*TargetAssignmentMemberValue) recordType() int16 { return TypeTargetAssignmentMember }

func (v *TargetAssignmentMemberValue) encode(w *writer) {
	encodeTPs(w, v.TopicPartitions)
	w.tags(nil)
}

func (v *TargetAssignmentMemberValue) decode(r *reader) {
	v.TopicPartitions = decodeTPs(r)
	r.tags(nil)
}

// CurrentMemberAssignmentValue is ConsumerGroupCurrentMemberAssignmentValue:
// a member's epochs, reconciliation state, the partitions it owns and the
// ones it must revoke.
type CurrentMemberAssignmentValue struct {
	MemberEpoch                 int32
	PreviousMemberEpoch         int32
	State                       int8
	AssignedPartitions          []TopicPartitions
	PartitionsPendingRevocation []TopicPartitions
}

func (*CurrentMemberAssignmentValue) recordType() int16 { return TypeCurrentMemberAssignment }

func (v *CurrentMemberAssignmentValue) encode(w *writer) {
	w.i32(v.MemberEpoch)
	w.i32(v.PreviousMemberEpoch)
	w.i8(v.State)
	encodeTPs(w, v.AssignedPartitions)
	encodeTPs(w, v.PartitionsPendingRevocation)
	w.tags(nil)
}

func (v *CurrentMemberAssignmentValue) decode(r *reader) {
	v.MemberEpoch = r.i32()
	v.PreviousMemberEpoch = r.i32()
	v.State = r.i8()
	v.AssignedPartitions = decodeTPs(r)
	v.PartitionsPendingRevocation = decodeTPs(r)
	r.tags(nil)
}

// RegularExpressionValue is ConsumerGroupRegularExpressionValue (Kafka
// 4.0): the topics a subscribed regular expression resolved to, the
// metadata version it was resolved against and when.
type RegularExpressionValue struct {
	Topics    []string
	Version   int64
	Timestamp int64
}

func (*RegularExpressionValue) recordType() int16 { return TypeRegularExpression }

func (v *RegularExpressionValue) encode(w *writer) {
	w.cstrs(v.Topics)
	w.i64(v.Version)
	w.i64(v.Timestamp)
	w.tags(nil)
}

func (v *RegularExpressionValue) decode(r *reader) {
	v.Topics = r.cstrs()
	v.Version = r.i64()
	v.Timestamp = r.i64()
	r.tags(nil)
}
