"""Consumer groups: membership, assignors, the transactional offset store, lag."""
