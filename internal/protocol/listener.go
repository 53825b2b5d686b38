package protocol

// Listener describes one listener a Server serves (Kafka's listeners:
// NAME://host:port with a security protocol). Responses that name brokers
// (Metadata, FindCoordinator, DescribeCluster) give their endpoints on the
// listener the request came in on.
type Listener struct {
	// Name is the listener name (upper case), e.g. PLAINTEXT. Empty on a
	// server started with Serve: handlers then answer with each broker's
	// inter-broker endpoint.
	Name string
}

// Listener returns the name of the listener the connection came in on
// ("" for Serve and for a nil Conn).
func (c *Conn) Listener() string {
	if c == nil || c.l == nil {
		return ""
	}
	return c.l.Name
}
