package netio

// A node of a mirrord cluster (the Backend is a ClusterBackend) answers
// Metadata, DescribeCluster and FindCoordinator for the whole cluster, as
// any Kafka broker does from its metadata cache: every live node at its
// address for the listener the request came in on, the controller, and
// each partition's leader, replicas and ISR wherever they are. A node
// alone (any other Backend) is the only broker, the controller, and the
// leader of everything, at its advertised address.

// clusterBackend is the backend's cluster view, or nil for a node alone.
func (c *conn) clusterBackend() ClusterBackend {
	cb, _ := c.server.backend.(ClusterBackend)
	return cb
}

// listenerName is the name of the listener a connection came in on ("" for
// a server without listeners, as in tests).
func (c *conn) listenerName() string {
	if c.listener == nil {
		return ""
	}
	return c.listener.Name
}

// brokers are the nodes a Metadata or DescribeCluster answer lists, and
// the controller it names.
func (c *conn) brokers() (brokers []Broker, controller int32) {
	if cb := c.clusterBackend(); cb != nil {
		return cb.Brokers(c.listenerName()), cb.ControllerID()
	}
	self := c.cluster()
	return []Broker{{NodeID: self.NodeID, Host: self.Host, Port: self.Port}}, self.NodeID
}

// brokerByID finds a live node's endpoint for this connection's listener.
func (c *conn) brokerByID(id int32) (Broker, bool) {
	brokers, _ := c.brokers()
	for _, b := range brokers {
		if b.NodeID == id {
			return b, true
		}
	}
	return Broker{}, false
}

// replication is one partition's leader, epoch, replicas and ISR: from the
// cluster, or this node alone leading it at the partition's epoch. ok is
// false when the cluster has not placed it.
func (c *conn) replication(topic string, partition int32, p Partition) (Replication, bool) {
	if cb := c.clusterBackend(); cb != nil {
		return cb.Replication(topic, partition)
	}
	self := c.cluster().NodeID
	r := Replication{Leader: self, Replicas: []int32{self}, ISR: []int32{self}}
	if p != nil {
		r.LeaderEpoch = p.LeaderEpoch()
	}
	return r, true
}

// rack is a broker's rack as Metadata and DescribeCluster carry it: null
// when not set.
func (b Broker) rack() *string {
	if b.Rack == "" {
		return nil
	}
	rack := b.Rack
	return &rack
}
