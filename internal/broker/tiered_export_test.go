package broker

// DeleteLocalBelowForTest runs storage.Log.DeleteLocalBelow as a step of
// p's owner, as tiered storage's local retention does.
func (p *Partition) DeleteLocalBelowForTest(offset int64) (n int, err error) {
	p.do(func() { n, err = p.log.DeleteLocalBelow(offset) })
	return n, err
}
