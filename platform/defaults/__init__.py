"""lakelog's built-in default files, shipped inside the package (read with :mod:`importlib.resources`).

- ``zookeeper.properties``: the template of the embedded ZooKeeper's ``zoo.cfg``
  (:func:`lakelog.runtime.zookeeper_files.write_config` fills its ``{placeholders}``);
- ``log4j2-zookeeper.properties``: the embedded ZooKeeper's logging (one file in its data dir);
- ``spark-defaults.conf``: lakelog's Spark settings, below every setting a user gives
  (:mod:`lakelog.spark.session`);
- ``log4j2.properties``: the log4j2 config of the Spark driver that :func:`lakelog.spark.session` starts.

They are package data, so an installed wheel has them as well as a source checkout; the examples a user
copies and edits (``conf/broker.properties``, ``conf/cluster/``, the Grafana dashboard) stay in the
repository's ``conf/``.
"""
