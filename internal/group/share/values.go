package share

// MemberMetadataValue is ShareGroupMemberMetadataValue: a member's
// subscription and client information.
type MemberMetadataValue struct {
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
}

func (*MemberMetadataValue) recordType() int16 { return TypeMemberMetadata }

func (v *MemberMetadataValue) encode(w *writer) {
	w.Cnstr(v.RackID)
	w.Cstr(v.ClientID)
	w.Cstr(v.ClientHost)
	w.Cstrs(v.SubscribedTopicNames)
	w.Tags(nil)
}

func (v *MemberMetadataValue) decode(r *reader) {
	v.RackID = r.Cnstr()
	v.ClientID = r.Cstr()
	v.ClientHost = r.Cstr()
	v.SubscribedTopicNames = r.Cstrs()
	r.Tags(nil)
}

// GroupMetadataValue is ShareGroupMetadataValue: the group epoch and
// (tagged field 0, KIP-1101) the hash of the subscribed topics' metadata.
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

// TargetAssignmentMetadataValue is ShareGroupTargetAssignmentMetadataValue:
// the epoch of the target assignment.
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

// TopicPartitionsValue is one topic's partitions in an assignment record.
type TopicPartitionsValue struct {
	TopicID    TopicID
	Partitions []int32
}

func encodeTPs(w *writer, tps []TopicPartitionsValue) {
	w.Carr(len(tps))
	for _, tp := range tps {
		w.Uuid(tp.TopicID)
		w.Ci32s(tp.Partitions)
		w.Tags(nil)
	}
}

func decodeTPs(r *reader) []TopicPartitionsValue {
	n := r.Carr(16 + 1 + 1)
	var out []TopicPartitionsValue
	for range n {
		var tp TopicPartitionsValue
		tp.TopicID = r.Uuid()
		tp.Partitions = r.Ci32s()
		r.Tags(nil)
		out = append(out, tp)
	}
	return out
}

// TargetAssignmentMemberValue is ShareGroupTargetAssignmentMemberValue: a
// member's partitions in the target assignment.
type TargetAssignmentMemberValue struct {
	TopicPartitions []TopicPartitionsValue
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

// CurrentMemberAssignmentValue is ShareGroupCurrentMemberAssignmentValue:
// a member's epochs, state (always 0, stable, for a share member) and
// assigned partitions.
type CurrentMemberAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	AssignedPartitions  []TopicPartitionsValue
}

func (*CurrentMemberAssignmentValue) recordType() int16 { return TypeCurrentMemberAssignment }

func (v *CurrentMemberAssignmentValue) encode(w *writer) {
	w.I32(v.MemberEpoch)
	w.I32(v.PreviousMemberEpoch)
	w.I8(v.State)
	encodeTPs(w, v.AssignedPartitions)
	w.Tags(nil)
}

func (v *CurrentMemberAssignmentValue) decode(r *reader) {
	v.MemberEpoch = r.I32()
	v.PreviousMemberEpoch = r.I32()
	v.State = r.I8()
	v.AssignedPartitions = decodeTPs(r)
	r.Tags(nil)
}

// TopicPartitionsInfo is a topic with some of its partitions in a
// ShareGroupStatePartitionMetadataValue.
type TopicPartitionsInfo struct {
	TopicID    TopicID
	TopicName  string
	Partitions []int32
}

// TopicInfo is a topic in a ShareGroupStatePartitionMetadataValue.
type TopicInfo struct {
	TopicID   TopicID
	TopicName string
}

// StatePartitionMetadataValue is ShareGroupStatePartitionMetadataValue:
// the share partitions whose state is being initialized, is initialized,
// or is being deleted (Kafka 4.1 field order).
type StatePartitionMetadataValue struct {
	InitializingTopics []TopicPartitionsInfo
	InitializedTopics  []TopicPartitionsInfo
	DeletingTopics     []TopicInfo
}

func (*StatePartitionMetadataValue) recordType() int16 { return TypeStatePartitionMetadata }

func encodeInfos(w *writer, ts []TopicPartitionsInfo) {
	w.Carr(len(ts))
	for _, t := range ts {
		w.Uuid(t.TopicID)
		w.Cstr(t.TopicName)
		w.Ci32s(t.Partitions)
		w.Tags(nil)
	}
}

func decodeInfos(r *reader) []TopicPartitionsInfo {
	n := r.Carr(16 + 1 + 1 + 1)
	var out []TopicPartitionsInfo
	for range n {
		var t TopicPartitionsInfo
		t.TopicID = r.Uuid()
		t.TopicName = r.Cstr()
		t.Partitions = r.Ci32s()
		r.Tags(nil)
		out = append(out, t)
	}
	return out
}

func (v *StatePartitionMetadataValue) encode(w *writer) {
	encodeInfos(w, v.InitializingTopics)
	encodeInfos(w, v.InitializedTopics)
	w.Carr(len(v.DeletingTopics))
	for _, t := range v.DeletingTopics {
		w.Uuid(t.TopicID)
		w.Cstr(t.TopicName)
		w.Tags(nil)
	}
	w.Tags(nil)
}

func (v *StatePartitionMetadataValue) decode(r *reader) {
	v.InitializingTopics = decodeInfos(r)
	v.InitializedTopics = decodeInfos(r)
	n := r.Carr(16 + 1 + 1)
	for range n {
		var t TopicInfo
		t.TopicID = r.Uuid()
		t.TopicName = r.Cstr()
		r.Tags(nil)
		v.DeletingTopics = append(v.DeletingTopics, t)
	}
	r.Tags(nil)
}
