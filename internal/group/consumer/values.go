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
	w.I32(v.Epoch)
	var tags []tagged
	if v.MetadataHash != 0 {
		t := &writer{}
		t.I64(v.MetadataHash)
		tags = append(tags, tagged{Tag: 0, Data: t.B})
	}
	w.Tags(tags)
}

func (v *GroupMetadataValue) decode(r *reader) {
	v.Epoch = r.I32()
	r.Tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.MetadataHash = sub.I64()
		if len(sub.B) != 0 {
			sub.Fail(errInvalid)
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
	w.Carr(len(v.Topics))
	for _, t := range v.Topics {
		w.Uuid(t.TopicID)
		w.Cstr(t.TopicName)
		w.I32(t.NumPartitions)
		w.Carr(len(t.PartitionRacks))
		for _, p := range t.PartitionRacks {
			w.I32(p.Partition)
			w.Cstrs(p.Racks)
			w.Tags(nil)
		}
		w.Tags(nil)
	}
	w.Tags(nil)
}

func (v *PartitionMetadataValue) decode(r *reader) {
	n := r.Carr(16 + 1 + 4 + 1 + 1)
	for range n {
		var t TopicMetadata
		t.TopicID = r.Uuid()
		t.TopicName = r.Cstr()
		t.NumPartitions = r.I32()
		np := r.Carr(4 + 1 + 1)
		for range np {
			var p PartitionRacks
			p.Partition = r.I32()
			p.Racks = r.Cstrs()
			r.Tags(nil)
			t.PartitionRacks = append(t.PartitionRacks, p)
		}
		r.Tags(nil)
		v.Topics = append(v.Topics, t)
	}
	r.Tags(nil)
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
	w.Cnstr(v.InstanceID)
	w.Cnstr(v.RackID)
	w.Cstr(v.ClientID)
	w.Cstr(v.ClientHost)
	w.Cstrs(v.SubscribedTopicNames)
	w.Cnstr(v.SubscribedTopicRegex)
	w.I32(v.RebalanceTimeoutMs)
	w.Cnstr(v.ServerAssignor)
	var tags []tagged
	if c := v.Classic; c != nil {
		// A nullable struct in a tagged field starts with a uvarint
		// presence marker (1), as Kafka's MessageDataGenerator writes it.
		t := &writer{}
		t.Uvarint(1)
		t.I32(c.SessionTimeoutMs)
		t.Carr(len(c.SupportedProtocols))
		for _, p := range c.SupportedProtocols {
			t.Cstr(p.Name)
			t.Cbytes(p.Metadata)
			t.Tags(nil)
		}
		t.Tags(nil)
		tags = append(tags, tagged{Tag: 0, Data: t.B})
	}
	w.Tags(tags)
}

func (v *MemberMetadataValue) decode(r *reader) {
	v.InstanceID = r.Cnstr()
	v.RackID = r.Cnstr()
	v.ClientID = r.Cstr()
	v.ClientHost = r.Cstr()
	v.SubscribedTopicNames = r.Cstrs()
	v.SubscribedTopicRegex = r.Cnstr()
	v.RebalanceTimeoutMs = r.I32()
	v.ServerAssignor = r.Cnstr()
	r.Tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		// A nullable struct in a tagged field: a uvarint presence
		// marker, 0 for null.
		if sub.Uvarint() == 0 {
			return true
		}
		c := &ClassicMemberMetadata{}
		c.SessionTimeoutMs = sub.I32()
		n := sub.Carr(3)
		for range n {
			var p ClassicProtocol
			p.Name = sub.Cstr()
			p.Metadata = sub.Cbytes()
			sub.Tags(nil)
			c.SupportedProtocols = append(c.SupportedProtocols, p)
		}
		sub.Tags(nil)
		if err := sub.Done(); err != nil {
			sub.Fail(err)
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
	w.I32(v.AssignmentEpoch)
	w.Tags(nil)
}

func (v *TargetAssignmentMetadataValue) decode(r *reader) {
	v.AssignmentEpoch = r.I32()
	r.Tags(nil)
}

// TopicPartitions is a topic id and some of its partitions.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

func encodeTPs(w *writer, tps []TopicPartitions) {
	w.Carr(len(tps))
	for _, tp := range tps {
		w.Uuid(tp.TopicID)
		w.Ci32s(tp.Partitions)
		w.Tags(nil)
	}
}

func decodeTPs(r *reader) []TopicPartitions {
	n := r.Carr(16 + 1 + 1)
	var out []TopicPartitions
	for range n {
		var tp TopicPartitions
		tp.TopicID = r.Uuid()
		tp.Partitions = r.Ci32s()
		r.Tags(nil)
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
	w.Tags(nil)
}

func (v *TargetAssignmentMemberValue) decode(r *reader) {
	v.TopicPartitions = decodeTPs(r)
	r.Tags(nil)
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
	w.I32(v.MemberEpoch)
	w.I32(v.PreviousMemberEpoch)
	w.I8(v.State)
	encodeTPs(w, v.AssignedPartitions)
	encodeTPs(w, v.PartitionsPendingRevocation)
	w.Tags(nil)
}

func (v *CurrentMemberAssignmentValue) decode(r *reader) {
	v.MemberEpoch = r.I32()
	v.PreviousMemberEpoch = r.I32()
	v.State = r.I8()
	v.AssignedPartitions = decodeTPs(r)
	v.PartitionsPendingRevocation = decodeTPs(r)
	r.Tags(nil)
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
	w.Cstrs(v.Topics)
	w.I64(v.Version)
	w.I64(v.Timestamp)
	w.Tags(nil)
}

func (v *RegularExpressionValue) decode(r *reader) {
	v.Topics = r.Cstrs()
	v.Version = r.I64()
	v.Timestamp = r.I64()
	r.Tags(nil)
}
