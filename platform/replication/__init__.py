"""ZooKeeper coordination: the embedded server, broker registry, topic and partition state."""
