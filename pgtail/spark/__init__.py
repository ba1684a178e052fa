"""PySpark support: the ``pgoutput`` data source and the ``pgtail spark`` pipeline.

Needs the ``spark`` extra (``pip install 'pgtail[spark]'``). `register(spark)` makes
``spark.readStream.format("pgoutput")`` available in a session.
"""

from __future__ import annotations

from typing import Any

from pgtail.errors import ConfigurationError

INSTALL_HINT = "pip install 'pgtail[spark]'"


def require_pyspark() -> None:
    """Raise a clear `ConfigurationError` when pyspark or pyarrow is missing."""
    missing = []
    for module in ("pyspark", "pyarrow"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ConfigurationError(
            f"the Spark support needs {' and '.join(missing)}, which is not installed",
            hint=INSTALL_HINT,
        )


def register(spark: Any) -> None:
    """Register the ``pgoutput`` format on a SparkSession."""
    require_pyspark()
    from pgtail.spark.direct import ChangeLogDataSource
    from pgtail.spark.load import LoadDataSource
    from pgtail.spark.source import PgoutputDataSource

    spark.dataSource.register(PgoutputDataSource)
    spark.dataSource.register(ChangeLogDataSource)  # pgtail spark run's (pgtail.spark.direct)
    spark.dataSource.register(LoadDataSource)  # its initial load's (pgtail.spark.load)
