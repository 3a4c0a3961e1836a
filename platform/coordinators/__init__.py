"""Coordinators above replication: the transaction coordinator (its ``__transaction_state`` log, markers,
records and state), the producer id blocks it hands out, and the loading of an internal topic's partitions
shared with the group coordinator; all of them reach the replica manager only through
:class:`~lakelog.coordinators.partition_writer.PartitionWriter`."""
