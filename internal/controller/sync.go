package controller

import "context"

// opMetadataOffset asks the active controller for the offset of the
// metadata it has committed and applied: a read barrier for a node that
// must act on metadata another node changed an instant ago.
const opMetadataOffset = "MetadataOffset"

func init() {
	handlers[opMetadataOffset] = (*active).metadataOffset
}

// metadataOffset answers the active controller's applied offset. Every
// write the active controller acknowledged was applied here before its
// answer, and a new active controller applies the whole committed log
// before it serves, so the offset covers every acknowledged change.
func (a *active) metadataOffset(context.Context, []byte) (any, int64, error) {
	return nil, a.n.st.Image().Offset, nil
}

// SyncMetadata implements metadata.Syncer: it returns once this node's
// image holds every metadata change the active controller had committed
// when asked (or with ctx's error).
func (n *Node) SyncMetadata(ctx context.Context) error {
	return n.write(ctx, opMetadataOffset, struct{}{}, nil)
}
