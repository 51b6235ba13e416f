#!/bin/sh
# binlake on open-source Spark with delta-spark: the three stages through spark-submit.
#
#   conf/spark-submit.sh /data/lake /var/lib/mysql
#
# spark-submit starts the session (with the Delta extensions below) before binlake runs, so
# pipelines/session.py uses that active session. The gold DSN is read from the environment
# (BINLAKE_GOLD_DSN), never put on the command line. Needs: pip install binlake (the wheel)
# on the driver and executors, Spark 4.0/4.1 and the matching delta-spark.
set -eu
LAKE=${1:?lake root}
BINLOGS=${2:?binlog directory}
DELTA=${DELTA_PACKAGE:-io.delta:delta-spark_2.13:4.0.0}
ENTRY=$(python -c 'import pipelines.cli as m; print(m.__file__)')

submit() {
  spark-submit \
    --master "${SPARK_MASTER:-local[*]}" \
    --packages "$DELTA" \
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
    --conf spark.sql.session.timeZone=UTC \
    "$ENTRY" --lake "$LAKE" "$@"
}

submit bronze --binlog-dir "$BINLOGS" --all
submit silver
submit gold
