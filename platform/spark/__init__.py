"""Spark: a SparkSession with Delta, and topics as SQL tables."""
