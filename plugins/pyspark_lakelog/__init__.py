"""``format("lakelog")`` in every SparkSession of a Python where lakelog is installed, without a call.

Spark 4 (SPARK-45917) registers Python data sources found on the Python path the first time a
session looks up a data source: a Python worker (``pyspark/sql/worker/lookup_data_sources.py``) lists the
top-level modules with :func:`pkgutil.iter_modules`, imports each whose name starts with ``pyspark_``,
and registers its ``DefaultSource`` (a :class:`pyspark.sql.datasource.DataSource` subclass) under
``DefaultSource.name()``. This module is that entry for lakelog: ``DefaultSource`` is
:class:`lakelog.spark.source.LakelogPlainDataSource`, so ``spark.read.format("lakelog")`` works in
``spark-submit`` jobs and notebooks that never import lakelog. It is the source without filter
pushdown: PySpark 4.2 refuses to plan a reader with ``pushFilters`` unless the session sets
``spark.sql.python.filterPushdown.enabled=true`` (default false), which such a session may not do.
:func:`lakelog.spark.register` and :func:`lakelog.spark.session` register the source with pushdown.

Conditions (``DataSourceManager`` in Spark's ``sql/core``): the lookup runs once per driver JVM, with
the Python of ``PYSPARK_DRIVER_PYTHON``, else ``PYSPARK_PYTHON``, else ``python3`` on ``PATH``; lakelog
must be installed in that Python so that :func:`pkgutil.iter_modules` lists this module: a regular install
(``pip install lakelog``, a wheel) does. An editable install (``pip install -e .``) maps ``lakelog`` and this
module through an import hook that :func:`pkgutil.iter_modules` does not list; ``make install`` adds a
``lakelog-spark-plugin.pth`` that puts ``plugins/`` on the path for that (``tests/test_install.py`` runs a
plain ``spark-submit`` job from both). Elsewhere call :func:`lakelog.spark.register` or build the session
with :func:`lakelog.spark.session`, which registers the source itself.
"""

from lakelog.spark.source import LakelogPlainDataSource as DefaultSource

__all__ = ["DefaultSource"]
