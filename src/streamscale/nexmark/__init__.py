"""Nexmark: the auction benchmark's generator and queries on two engines.

:mod:`~streamscale.nexmark.generator` makes the events, :mod:`~streamscale.nexmark.files`
writes and reads them, :mod:`~streamscale.nexmark.spark_sql` runs the queries on Spark's
own engine and :mod:`~streamscale.nexmark.streamscale_engine` on streamscale's keyed
operators.
"""
