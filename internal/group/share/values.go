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
	w.cnstr(v.RackID)
	w.cstr(v.ClientID)
	w.cstr(v.ClientHost)
	w.cstrs(v.SubscribedTopicNames)
	w.tags(nil)
}

func (v *MemberMetadataValue) decode(r *reader) {
	v.RackID = r.cnstr()
	v.ClientID = r.cstr()
	v.ClientHost = r.cstr()
	v.SubscribedTopicNames = r.cstrs()
	r.tags(nil)
}

// GroupMetadataValue is ShareGroupMetadataValue: the group epoch and
// (tagged field 0, KIP-1101) the hash of the subscribed topics' metadata.
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

// TargetAssignmentMetadataValue is ShareGroupTargetAssignmentMetadataValue:
// the epoch of the target assignment.
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

// TopicPartitionsValue is one topic's partitions in an assignment record.
type TopicPartitionsValue struct {
	TopicID    TopicID
	Partitions []int32
}

func encodeTPs(w *writer, tps []TopicPartitionsValue) {
	w.carr(len(tps))
	for _, tp := range tps {
		w.uuid(tp.TopicID)
		w.ci32s(tp.Partitions)
		w.tags(nil)
	}
}

func decodeTPs(r *reader) []TopicPartitionsValue {
	n := r.carr(16 + 1 + 1)
	var out []TopicPartitionsValue
	for range n {
		var tp TopicPartitionsValue
		tp.TopicID = r.uuid()
		tp.Partitions = r.ci32s()
		r.tags(nil)
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
	w.tags(nil)
}

func (v *TargetAssignmentMemberValue) decode(r *reader) {
	v.TopicPartitions = decodeTPs(r)
	r.tags(nil)
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
	w.i32(v.MemberEpoch)
	w.i32(v.PreviousMemberEpoch)
	w.i8(v.State)
	encodeTPs(w, v.AssignedPartitions)
	w.tags(nil)
}

func (v *CurrentMemberAssignmentValue) decode(r *reader) {
	v.MemberEpoch = r.i32()
	v.PreviousMemberEpoch = r.i32()
	v.State = r.i8()
	v.AssignedPartitions = decodeTPs(r)
	r.tags(nil)
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
	w.carr(len(ts))
	for _, t := range ts {
		w.uuid(t.TopicID)
		w.cstr(t.TopicName)
		w.ci32s(t.Partitions)
		w.tags(nil)
	}
}

func decodeInfos(r *reader) []TopicPartitionsInfo {
	n := r.carr(16 + 1 + 1 + 1)
	var out []TopicPartitionsInfo
	for range n {
		var t TopicPartitionsInfo
		t.TopicID = r.uuid()
		t.TopicName = r.cstr()
		t.Partitions = r.ci32s()
		r.tags(nil)
		out = append(out, t)
	}
	return out
}

func (v *StatePartitionMetadataValue) encode(w *writer) {
	encodeInfos(w, v.InitializingTopics)
	encodeInfos(w, v.InitializedTopics)
	w.carr(len(v.DeletingTopics))
	for _, t := range v.DeletingTopics {
		w.uuid(t.TopicID)
		w.cstr(t.TopicName)
		w.tags(nil)
	}
	w.tags(nil)
}

func (v *StatePartitionMetadataValue) decode(r *reader) {
	v.InitializingTopics = decodeInfos(r)
	v.InitializedTopics = decodeInfos(r)
	n := r.carr(16 + 1 + 1)
	for range n {
		var t TopicInfo
		t.TopicID = r.uuid()
		t.TopicName = r.cstr()
		r.tags(nil)
		v.DeletingTopics = append(v.DeletingTopics, t)
	}
	r.tags(nil)
}
